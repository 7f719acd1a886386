"""Development kit: real servers on loopback for tests, the demo and benchmarks. Not shipped in the images."""
