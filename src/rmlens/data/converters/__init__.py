"""Converters of the field's public preference datasets to the canonical pair table.

One private module per dataset (``_prism.py``, ``_shp.py``, ...) defines ``CONVERTER``; the
registry finds them by name, so a new dataset is one file. Layouts, traps and fixtures:
``shared/data/schemas/SCHEMAS.md``.
"""

from rmlens._lazy import attach

__all__, __getattr__, __dir__ = attach(
    __name__,
    {
        "_convert": ["convert", "convert_with_report", "report_path", "write_conversion"],
        "_registry": ["Converter", "converter_names", "get_converter"],
    },
)
