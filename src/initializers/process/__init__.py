"""The program's life as a process: stopping (SIGTERM, SIGINT, TIMEOUT), its user in an image, its termination message.

May import `common` only.
"""
