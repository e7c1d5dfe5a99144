"""The options of each `artmem` command, one function a command (argparse only)."""

from __future__ import annotations

import argparse

SLICE_FORMATS = ("table", "csv", "jsonl", "parquet")
EXP_HELP = (
    "an experiment id (exp_…), or a unique prefix of at least 8 characters after exp_ (exp_ may "
    "be left out, as `list` prints it)"
)


def record_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--session", required=True, help="the harness session that exported the file")
    p.add_argument("path", help="file in <rlm_root>/sessions/SESSION/exports/ (or relative to it)")
    p.add_argument(
        "--title",
        help="one line naming the result (default: the file name; a re-record keeps the card's)",
    )
    p.add_argument(
        "--summary",
        help="what the result holds and how it was made (default: the file name and the "
        "table's columns; a re-record keeps the card's)",
    )
    p.add_argument(
        "--query",
        metavar="TEXT",
        help="the query or computation that made the result: its SHA-256 is the query "
        "fingerprint, and the text is kept on the card (never sent to Honcho)",
    )
    p.add_argument(
        "--query-fingerprint",
        metavar="HEX",
        help="instead of --query: 64 lowercase hex characters, the SHA-256 of a stable "
        "description of the query",
    )
    p.add_argument("--source", required=True, help="where the data came from")
    p.add_argument("--source-version", required=True, help="dataset version, or 'unknown'")
    p.add_argument(
        "--media-type",
        help="e.g. text/csv (default: detected from the content, Parquet and Arrow for certain; "
        "a re-record keeps the card's type)",
    )
    p.add_argument(
        "--tag",
        action="append",
        dest="tags",
        metavar="TAG",
        help="a tag; repeat for more (a re-record adds them to the card's tags; --tag '' clears)",
    )
    p.add_argument(
        "--column",
        action="append",
        dest="columns",
        metavar="COLUMN",
        help="a column name; repeat for more (omitted on a re-record: kept; --column '' clears)",
    )
    p.add_argument(
        "--derived-from",
        action="append",
        dest="parents",
        metavar="EXPERIMENT_ID",
        help="an experiment of this project the result was derived from; one option per parent "
        "(fixed at the first record: a re-record keeps them)",
    )
    csv_read_args(p, remembered=True)


def csv_read_args(p: argparse.ArgumentParser, *, remembered: bool = False) -> None:
    """The `--csv-*` read options: kept on the card by `record`, for one read by `slice`."""
    scope = (
        "kept on the card: every later slice and export reads with it; a re-record with "
        "any --csv-* flag replaces them all, --csv-type '' clears"
        if remembered
        else "for this read only, over the card's declared types"
    )
    nulls = "kept on the card" if remembered else "for this read only, instead of the card's tokens"
    p.add_argument(
        "--csv-type",
        action="append",
        dest="csv_types",
        metavar="COLUMN=TYPE",
        help=f"read a CSV/TSV column as TYPE (int64, float64, string, bool, date32, "
        f"timestamp[s], ...); repeat for more ({scope})",
    )
    p.add_argument(
        "--csv-null",
        action="append",
        dest="csv_nulls",
        metavar="TOKEN",
        help="also read TOKEN as null (blank cells, NA, null, NaN... always are); repeat for more "
        f"({nulls})",
    )
    decimal = "kept on the card" if remembered else "for this read only, instead of the card's"
    p.add_argument(
        "--csv-decimal",
        dest="csv_decimal",
        metavar="MARK",
        help=f"the decimal mark of the CSV/TSV's numbers: ',' reads 1,5 as 1.5 ({decimal})",
    )
    p.add_argument(
        "--csv-encoding",
        dest="csv_encoding",
        metavar="NAME",
        help="the CSV/TSV's text encoding if not UTF-8: cp1252 (a spreadsheet's CSV on Windows), "
        f"latin-1 or iso-8859-15 ({decimal})",
    )


def resolve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiment_id", help=EXP_HELP)
    p.add_argument("--current-source-version", help="compare freshness against this version")


def show_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiment_id", help=EXP_HELP)
    p.add_argument("--current-source-version", help="compare freshness against this version")


def slice_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiment_id", help=EXP_HELP)
    p.add_argument(
        "--columns",
        action="append",
        help="comma-separated columns, repeatable; quote a name holding a comma or spaces as in "
        "--where: --columns 'id,\"dose, mg\"' (default: all)",
    )
    p.add_argument("--where", help='filter, e.g. "cohort in (1, 2) and dose >= 10"')
    p.add_argument(
        "--limit",
        type=int,
        help="at most N rows (default: the limit; with --out as parquet/csv/jsonl: all rows)",
    )
    p.add_argument("--offset", type=int, default=0, help="skip the first N matching rows")
    p.add_argument(
        "--format",
        choices=SLICE_FORMATS,
        help="how to write the rows (default: from the --out extension "
        ".parquet/.csv/.jsonl/.txt, else an aligned table)",
    )
    p.add_argument(
        "--out",
        help="write the rows to a new FILE (atomically, never over an existing file) instead "
        "of stdout; parquet, csv and jsonl are streamed, not capped by [slice] max_rows and "
        "max_bytes",
    )
    csv_read_args(p)
    p.add_argument("--current-source-version", help="compare freshness against this version")


def search_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("query", help="words to find in titles, summaries, tags and columns")
    p.add_argument("--limit", type=int, help="how many hits (default and maximum: the limit)")


def list_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--tag",
        action="append",
        dest="tags",
        default=[],
        metavar="TAG",
        help="only experiments with this tag; repeat: all must match",
    )
    p.add_argument("--source", help="only experiments from this source")
    p.add_argument("--since", help="only experiments created on or after YYYY-MM-DD (UTC)")
    p.add_argument("--media-type", help="only experiments of this media type, e.g. text/csv")


def export_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiment_id", help=EXP_HELP)
    p.add_argument("dest", help="the file to write (refused if it exists, unless --force)")
    p.add_argument("--force", action="store_true", help="replace DEST atomically if it exists")


def lineage_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiment_id", help=EXP_HELP)


def diff_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("first", metavar="A", help=EXP_HELP)
    p.add_argument("second", metavar="B", help="the experiment to compare A with")
    p.add_argument(
        "--rows",
        action="store_true",
        help="also compare rows, matched by --key (bounded by [slice] max_rows and max_bytes)",
    )
    p.add_argument("--key", metavar="COL", help="the column that identifies a row (with --rows)")


def ui_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any free)")
    p.add_argument("--open", action="store_true", help="open the page in a web browser")


def migrate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--to",
        choices=["s3"],
        required=True,
        help='the target: the bucket of [storage] (backend = "s3")',
    )


def edit_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiment_id", help=EXP_HELP)
    p.add_argument("--title", help="a new title")
    p.add_argument("--summary", help="a new summary")
    p.add_argument("--source", help="a new source label")
    p.add_argument("--add-tag", action="append", dest="add_tags", default=[], metavar="TAG")
    p.add_argument("--remove-tag", action="append", dest="remove_tags", default=[], metavar="TAG")
    p.add_argument(
        "--column",
        action="append",
        dest="columns",
        metavar="COLUMN",
        help="the column names, replacing the card's; repeat for more (--column '' clears)",
    )
    p.add_argument(
        "--if-revision",
        metavar="REV",
        help="edit only if the card is still at this revision (as the last edit printed)",
    )
    for name in ("--query-fingerprint", "--source-version", "--artifact"):  # refused, clearly
        p.add_argument(name, help=argparse.SUPPRESS)


def rm_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiment_ids", nargs="+", metavar="EXPERIMENT_ID", help=EXP_HELP)


def gc_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--apply",
        action="store_true",
        help="delete what the dry run lists (default: list it and delete nothing)",
    )


def completion_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "shell",
        choices=("bash", "zsh", "fish", "ids"),
        help="the shell (`ids PREFIX`: the experiment ids the scripts complete)",
    )
    p.add_argument("prefix", nargs="?", help=argparse.SUPPRESS)


def fsck_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--repair",
        action="store_true",
        help="remove stale temp files and quarantine corrupt objects (never deletes objects)",
    )


def sync_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--deadline", type=float, help="seconds to keep delivering (default: config)")


def no_args(p: argparse.ArgumentParser) -> None:
    del p


def demo_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--keep", action="store_true", help="keep the temporary workspace")


def eval_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--report", metavar="PATH", help="also write the JSON report to PATH")
    p.add_argument(
        "--live",
        action="store_true",
        help="run against the Honcho of [honcho] in --config instead of the fake; creates, "
        "and afterwards deletes, only its own uniquely named synthetic workspaces",
    )
    p.add_argument(
        "--case",
        action="append",
        dest="cases",
        default=[],
        metavar="ID",
        help="only this corpus case (id or number, e.g. 5 or c05-correction); repeat for more",
    )
    p.add_argument(
        "--from",
        dest="judge",
        metavar="PATH",
        help="run nothing: judge the gates of a report written elsewhere (e.g. Stage A, MCP)",
    )
