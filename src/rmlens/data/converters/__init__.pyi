"""Type stub of ``rmlens.data.converters``: its lazily loaded names (``rmlens._lazy.attach``) as
imports an IDE or a type checker follows to their code; tests/test_stubs.py keeps it
in step with ``__all__``."""

from ._convert import convert as convert
from ._convert import convert_with_report as convert_with_report
from ._convert import report_path as report_path
from ._convert import write_conversion as write_conversion
from ._registry import Converter as Converter
from ._registry import converter_names as converter_names
from ._registry import get_converter as get_converter
