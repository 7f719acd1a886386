"""Every call into a third-party library's private API, one small module per library.

Each module names the release range its calls were read against and checks the installed release at import, so
an upgrade past it fails at once, naming the library, rather than somewhere in the middle of a download.

May import `common` only.
"""
