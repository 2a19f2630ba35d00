"""Input schemas (pydantic) and the loader that turns files into validated, SI-unit specs.

Unit conversion happens here and only here: the engine sees SI units only.
"""
