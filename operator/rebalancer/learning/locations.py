# mypy: disable-error-code="import-untyped"
"""Where the learning job runs and reads: the Spark master and the history's URL, checked early.

Plain Python (no pyspark, no file opened), so `rebalancer learn` refuses bad input with a
message naming the flag and the fix before it pays for a JVM, and the tests check the rules on
tables.
"""

from __future__ import annotations

import re

# URL schemes whose files Spark's own Hadoop filesystems open: the job hands such a history to
# Spark as a path (Spark lists and reads it, on the executors), never opens it in Python.
# `s3a`, `gs` and `abfs(s)`/`wasb(s)` need their Hadoop connector jars in the image (pyspark
# bundles none of them); `hdfs` and `viewfs` are in pyspark's hadoop-client jars.
SPARK_REMOTE_SCHEMES = ("hdfs", "viewfs", "s3a", "gs", "abfs", "abfss", "wasb", "wasbs")
# Local files: Spark reads them too, and the driver checks every footer first.
LOCAL_SCHEMES = ("file", "local")

_MASTERS = (
    re.compile(r"local(\[(\*|[1-9][0-9]*)(,[0-9]+)?\])?"),
    re.compile(r"local-cluster\[[1-9][0-9]*,[1-9][0-9]*,[1-9][0-9]*\]"),
    re.compile(r"spark://[^/:,\s]+:[0-9]+(,[^/:,\s]+:[0-9]+)*"),
    re.compile(r"k8s://\S+"),
    re.compile(r"yarn"),
)
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def master_problem(master: str) -> str | None:
    """Why `--master` cannot be a Spark master URL, or None when it can."""
    if any(pattern.fullmatch(master) for pattern in _MASTERS):
        return None
    hint = ""
    if master.startswith("spark://"):
        hint = " (a standalone master needs its port: spark://HOST:7077)"
    elif master.startswith("local"):
        hint = " (local, local[4], local[*] or local[*,3] for retries)"
    return (
        f"--master {master!r} is not a Spark master URL{hint}: use local[N] or local[*] on this "
        "machine, spark://HOST:PORT for a standalone cluster, k8s://https://API-SERVER:443 for "
        "Kubernetes, or yarn"
    )


def scheme_of(location: str) -> str:
    """The URL scheme of a history or output location; a plain path is "file"."""
    match = _SCHEME.match(location)
    return match.group(1).lower() if match else "file"


def read_by_spark(location: str) -> bool:
    """Whether the history at `location` is listed and read by Spark alone (object stores and
    HDFS: the executors read it, the driver never opens a file of it)."""
    return scheme_of(location) in SPARK_REMOTE_SCHEMES


def location_problem(flag: str, location: str, *, spark_reads: bool) -> str | None:
    """Why `location`, given to `flag`, cannot be opened, or None when it can.

    With `spark_reads`, a Spark-read scheme (SPARK_REMOTE_SCHEMES) is left to Spark; anything
    else must have an fsspec filesystem installed, since Python opens it.
    """
    if not location.strip():
        return f"{flag} is empty: give a directory or a URL such as s3a://bucket/history"
    if spark_reads and read_by_spark(location):
        return None
    import fsspec

    try:
        fsspec.core.url_to_fs(location)
    except (ImportError, ValueError, OSError) as error:
        scheme = scheme_of(location)
        spark_note = (
            f"; for the history, Spark reads {', '.join(s + '://' for s in SPARK_REMOTE_SCHEMES)}"
            " itself"
            if flag == "--history"
            else ""
        )
        return (
            f"{flag} {location!r}: Python cannot open {scheme}:// here "
            f"({str(error).splitlines()[0][:120]}): install the fsspec filesystem for it "
            f"(s3fs for s3:// and s3a://, gcsfs for gs://, adlfs for abfs://) or use a local "
            f"path{spark_note}"
        )
    return None
