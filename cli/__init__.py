"""The ``aescl`` command: a thin Click layer that parses, calls the library and prints."""
