#!/usr/bin/env python3
"""Checks fedkit's TensorBoard event files with TensorBoard's own reader.

Usage: tensorboard_check.py RUN_DIR...   (under a Python that has `tensorboard`)

For each run folder: every record of events.out.tfevents.fedkit passes
TensorBoard's framing and CRC checks; every scalar TensorBoard loads is a cell
of metrics.csv (metrics/<column>, rejected/<reason>) or diagnostics.csv
(diagnostics/<name>) at the same round, and every filled cell has its scalar;
the text "spec" is spec.textproto. Prints one line per run; exits 1 on the
first difference, naming the file, tag and round.
"""
import csv
import math
import os
import sys

from tensorboard.backend.event_processing import event_accumulator
from tensorboard.compat.tensorflow_stub import errors
from tensorboard.compat.tensorflow_stub import pywrap_tensorflow

EVENT_FILE = "events.out.tfevents.fedkit"


class Mismatch(Exception):
    pass


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def count_records(path):
    """Records in `path`, read with TensorBoard's reader, which checks each CRC."""
    reader = pywrap_tensorflow.PyRecordReader_New(path.encode())
    records = 0
    while True:
        try:
            reader.GetNext()
        except errors.OutOfRangeError:
            return records
        except errors.DataLossError as e:
            raise Mismatch(f"{path}: record {records + 1}: {e}")
        records += 1


def tolerance(column, value):
    # The CSV files print 6 significant digits (half a unit in the 6th is up to
    # 5e-6 relative; the two clocks: 3 decimals); TensorBoard keeps a float32
    # (6e-8 relative, which a long virtual clock's 3 decimals can exceed).
    if column in ("seconds", "virtual_seconds"):
        return 5.1e-4 + 6e-8 * abs(value)
    return 5.1e-6 * abs(value)


def expected_scalars(run_dir):
    """{tag: {round: value}} from the CSV files, and the counters' tags."""
    diagnostics_path = os.path.join(run_dir, "diagnostics.csv")
    diagnostics = read_csv(diagnostics_path) if os.path.exists(diagnostics_path) else []
    diagnostic_columns = set(diagnostics[0]) - {"round"} if diagnostics else set()
    expected = {}
    counters = set()
    for row in read_csv(os.path.join(run_dir, "metrics.csv")):
        step = int(row["round"])
        for column, cell in row.items():
            if column == "round" or cell == "":
                continue
            if column.startswith("rejected_"):
                tag = "rejected/" + column[len("rejected_"):]
                counters.add(tag)
            elif column in diagnostic_columns:
                tag = "diagnostics/" + column
            else:
                tag = "metrics/" + column
            expected.setdefault(tag, {})[step] = (column, float(cell))
    for row in diagnostics:
        step = int(row["round"])
        for column, cell in row.items():
            if column != "round" and cell != "":
                expected.setdefault("diagnostics/" + column, {})[step] = (column, float(cell))
    return expected, counters


def check_run(run_dir):
    path = os.path.join(run_dir, EVENT_FILE)
    if not os.path.exists(path):
        raise Mismatch(f"{path} does not exist")
    records = count_records(path)

    accumulator = event_accumulator.EventAccumulator(
        run_dir, size_guidance={event_accumulator.SCALARS: 0, event_accumulator.TENSORS: 0})
    accumulator.Reload()
    tags = accumulator.Tags()
    loaded = {tag: {e.step: e.value for e in accumulator.Scalars(tag)} for tag in tags["scalars"]}

    expected, counters = expected_scalars(run_dir)
    for tag in sorted(set(loaded) | set(expected)):
        got = loaded.get(tag, {})
        want = expected.get(tag, {})
        for step in sorted(set(got) | set(want)):
            if step not in want:
                raise Mismatch(f"{path}: {tag} at round {step} = {got[step]}, "
                               "which metrics.csv and diagnostics.csv lack")
            column, value = want[step]
            if step not in got:
                # metrics.csv gives a rejection counter 0 before its first rejection.
                if tag in counters and value == 0 and all(s > step for s in got):
                    continue
                raise Mismatch(f"{path}: no {tag} at round {step} (the CSV has {value})")
            if not math.isclose(got[step], value, rel_tol=0, abs_tol=tolerance(column, value)):
                raise Mismatch(f"{path}: {tag} at round {step} is {got[step]}, the CSV has {value}")

    if "spec" not in tags["tensors"]:
        raise Mismatch(f"{path}: no text 'spec' (tensors: {tags['tensors']})")
    spec_event = accumulator.Tensors("spec")[0]
    text = spec_event.tensor_proto.string_val[0].decode()
    with open(os.path.join(run_dir, "spec.textproto")) as f:
        spec = f.read()
    if text.replace("\n    ", "\n").strip() != spec.strip():
        raise Mismatch(f"{path}: the text 'spec' is not spec.textproto")
    plugin = accumulator.SummaryMetadata("spec").plugin_data.plugin_name
    if plugin != "text":
        raise Mismatch(f"{path}: the spec's plugin is {plugin!r}, not 'text'")

    points = sum(len(v) for v in loaded.values())
    print(f"{run_dir}: {records} records, {len(loaded)} scalar tags, {points} points, "
          "the spec as text: as metrics.csv and diagnostics.csv")


def main(run_dirs):
    if not run_dirs:
        print(__doc__)
        return 2
    try:
        for run_dir in run_dirs:
            check_run(run_dir)
    except Mismatch as e:
        print(f"MISMATCH: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
