"""The program's life as a process: stopping on SIGTERM, SIGINT or TIMEOUT, the user it runs as in an image, the
termination message Kubernetes shows.

May import `common` only.
"""
