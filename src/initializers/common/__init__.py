"""The vocabulary and small utilities every layer shares: errors and their exit codes, what a source lists
(`RemoteFile`, `Checksum`), logs with redaction, the injectable clock, generator return values, iterators run ahead.

The floor of the house: imports nothing of the package.
"""
