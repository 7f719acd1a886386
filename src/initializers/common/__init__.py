"""The vocabulary and small utilities every layer shares: errors and their exit codes, what a source lists
(`RemoteFile`, `Checksum`), logs with redaction, the injectable clock, generator return values, iterators run ahead,
figures for people, and what a terminal may be sent.

The floor of the house: imports nothing of the package.
"""
