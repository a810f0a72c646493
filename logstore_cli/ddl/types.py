"""Column types: Spark and Flink spellings, normalized to the Spark SQL type string (lower case).

The parser reads the type syntax; this module says which names exist, what arguments they take and
what they become. Composite types (ARRAY, MAP, STRUCT/ROW) are assembled by the parser.
"""

from __future__ import annotations

import difflib
import re
from typing import NamedTuple


class ScalarType(NamedTuple):
    """A DDL type name: the Spark type it becomes and the arguments it takes."""

    spark: str  # the Spark SQL name it becomes
    max_args: int = 0  # how many (n[, m]) arguments it may take
    arg_names: tuple[str, ...] = ()


SCALARS: dict[str, ScalarType] = {
    "BOOLEAN": ScalarType("boolean"),
    "BOOL": ScalarType("boolean"),
    "TINYINT": ScalarType("tinyint"),
    "BYTE": ScalarType("tinyint"),
    "SMALLINT": ScalarType("smallint"),
    "SHORT": ScalarType("smallint"),
    "INT": ScalarType("int"),
    "INTEGER": ScalarType("int"),
    "BIGINT": ScalarType("bigint"),
    "LONG": ScalarType("bigint"),
    "FLOAT": ScalarType("float"),
    "REAL": ScalarType("float"),
    "DOUBLE": ScalarType("double"),  # DOUBLE PRECISION is handled by the parser
    "STRING": ScalarType("string"),
    "VARCHAR": ScalarType("string", 1, ("length",)),
    "CHAR": ScalarType("string", 1, ("length",)),
    "CHARACTER": ScalarType("string", 1, ("length",)),
    "BINARY": ScalarType("binary", 1, ("length",)),
    "VARBINARY": ScalarType("binary", 1, ("length",)),
    "BYTES": ScalarType("binary"),
    "DATE": ScalarType("date"),
    "TIMESTAMP": ScalarType("timestamp", 1, ("precision",)),
    "TIMESTAMP_LTZ": ScalarType("timestamp", 1, ("precision",)),
    "TIMESTAMP_NTZ": ScalarType("timestamp_ntz"),
    "DECIMAL": ScalarType("decimal", 2, ("precision", "scale")),
    "DEC": ScalarType("decimal", 2, ("precision", "scale")),
    "NUMERIC": ScalarType("decimal", 2, ("precision", "scale")),
}
COMPOSITES = ("ARRAY", "MAP", "STRUCT", "ROW")

# Types users may write that Delta/Spark tables cannot hold: a clear "not supported", not "unknown".
UNSUPPORTED: dict[str, str] = {
    "TIME": "Spark SQL has no TIME type; use STRING or TIMESTAMP",
    "INTERVAL": "Delta tables cannot store INTERVAL columns",
    "MULTISET": "Spark SQL has no MULTISET type; use MAP<t, INT> or ARRAY<t>",
    "RAW": "Spark SQL has no RAW type; use BINARY",
    "VARIANT": "VARIANT columns are not supported by logstore",
    "VOID": "a VOID column holds no data",
    "NULL": "a NULL column holds no data",
}

MAX_DECIMAL_PRECISION = 38
MAX_TIMESTAMP_PRECISION = 9
_PLAIN_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def suggest_type(name: str) -> str | None:
    """The known type name closest to a misspelt one."""
    matches = difflib.get_close_matches(name.upper(), [*SCALARS, *COMPOSITES], n=1, cutoff=0.6)
    return matches[0] if matches else None


def check_args(name: str, args: list[int]) -> str | None:
    """Why ``args`` are wrong for the scalar type ``name``, or None when they are fine."""
    scalar = SCALARS[name]
    if len(args) > scalar.max_args:
        takes = (
            "no arguments"
            if scalar.max_args == 0
            else f"at most {scalar.max_args} ({', '.join(scalar.arg_names)})"
        )
        return f"type {name} takes {takes}"
    if scalar.spark == "decimal":
        precision = args[0] if args else 10
        scale = args[1] if len(args) > 1 else 0
        if not 1 <= precision <= MAX_DECIMAL_PRECISION:
            return (
                f"DECIMAL precision must be between 1 and {MAX_DECIMAL_PRECISION}, not {precision}"
            )
        if not 0 <= scale <= precision:
            return f"DECIMAL scale must be between 0 and the precision ({precision}), not {scale}"
    elif (
        scalar.arg_names == ("precision",) and args and not 0 <= args[0] <= MAX_TIMESTAMP_PRECISION
    ):
        return f"{name} precision must be between 0 and {MAX_TIMESTAMP_PRECISION}, not {args[0]}"
    elif scalar.arg_names == ("length",) and args and args[0] < 1:
        return f"{name} length must be at least 1, not {args[0]}"
    return None


def spark_scalar(name: str, args: list[int]) -> str:
    """The Spark type string of a scalar type whose arguments ``check_args`` accepted."""
    scalar = SCALARS[name]
    if scalar.spark == "decimal":
        precision = args[0] if args else 10
        scale = args[1] if len(args) > 1 else 0
        return f"decimal({precision},{scale})"
    return scalar.spark  # lengths and precisions have no Spark equivalent: string, timestamp


def struct_field(name: str, spark_type: str) -> str:
    """``name:type`` as Spark's catalog string writes it, backquoting names that need it."""
    if not _PLAIN_FIELD.fullmatch(name):
        name = "`" + name.replace("`", "``") + "`"
    return f"{name}:{spark_type}"


# Type widening (``alter-table --widen-column``): only the changes Delta 4.0's typeWidening
# feature makes AND that leave every value already in the log written the same in wire format 1's
# JSON (an integer's digits, a decimal's digits at the same scale), so the log's old records mean
# what Delta's widened rows hold. Not FLOAT → DOUBLE: the log holds a float's shortest float32
# text ("0.1"), which read as a double is not the float32 value Delta widens (0.10000000149011612).
_INTEGER_RANK = {"tinyint": 0, "smallint": 1, "int": 2, "bigint": 3}
_DECIMAL = re.compile(r"decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)")
ALLOWED_WIDENINGS = (
    "TINYINT → SMALLINT → INT → BIGINT (to any wider), "
    "DECIMAL(p,s) → DECIMAL(p2,s) with p2 > p (same scale)"
)


def _decimal(type_: str) -> tuple[int, int] | None:
    if type_ == "decimal":
        return 10, 0  # Spark's default DECIMAL
    found = _DECIMAL.fullmatch(type_)
    return (int(found.group(1)), int(found.group(2))) if found else None


def widening_allowed(old: str, new: str) -> bool:
    """Whether a column of Spark type ``old`` may become ``new`` (both normalized, lower case)."""
    if old in _INTEGER_RANK and new in _INTEGER_RANK:
        return _INTEGER_RANK[new] > _INTEGER_RANK[old]
    before, after = _decimal(old), _decimal(new)
    if before is None or after is None:
        return False
    return after[1] == before[1] and after[0] > before[0]
