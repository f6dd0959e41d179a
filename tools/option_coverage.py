#!/usr/bin/env python3
"""Option fields that no test or spec sets.

Every field of every message of fl/spec.proto and of each plugin's *_options.proto
(found by glob, nested messages included) must be set by at least one test or spec,
or be listed, with a reason, in tools/option_coverage_allowlist.txt. A listed field
that has become covered is an error too, so the list cannot go stale.

Where a field counts as set:
  * specs: experiments/**/*.textproto and **/testdata/**/*.textproto (not the
    fuzz corpora), *.sweep.textproto included;
  * tests: *_test.cc, *_test.sh and *_test.py.
How:
  * in text format: a spec file; every string literal of a C++ test (adjacent
    literals joined, escapes undone); every quoted string and here-document of a
    shell test, and quoted string of a Python test; and, recursively, every string
    value inside those (a sweep file's `set: "server { ... }"`). A piece of text
    counts only if it reads as text format from its start (a prefix cut short is
    fine), so an expected error message such as "median norm: ..." does not count.
    Then `name: value`, `name {` and `name: {` set field `name`, resolved by type:
    `server { eval_batch_size: 1 }` sets ServerSpec.eval_batch_size and
    `[type.googleapis.com/fedkit.aggregators.ElasticOptions] { tau: 1 }` sets
    ElasticOptions.tau. A spec file's top is an ExperimentSpec (a sweep file's a
    SweepSpec); another fragment's top is every message that has all the fields
    named there (`kind: SCALE fraction: 0.2`: FaultSpec and CodecSpec), or, when
    none has, each name's messages.
  * C++ setters outside strings and comments: `set_name(`, `mutable_name(`,
    `add_name(`, for the messages of each .proto whose header (x.pb.h) the test
    names or one of whose message names it uses.
A field set only in a comment does not count. Enum values are not checked.

Usage: tools/option_coverage.py [--root DIR] [--list]
Exit 0 when the uncovered fields are exactly the listed ones; 1 otherwise, naming
each difference; 2 when the descriptors or a spec file cannot be read.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

ALLOWLIST = "tools/option_coverage_allowlist.txt"
# Only to resolve the sweep files' own fields; their options are not checked.
CONTEXT_PROTOS = ["tools/sweep/sweep.proto"]
SPEC_ROOT = "fedkit.ExperimentSpec"
SWEEP_ROOT = "fedkit.sweep.SweepSpec"
SKIPPED_DIRS = {".git", "third_party", "fuzz"}


# --- Text format ------------------------------------------------------------


class Node:
    """One field of a text-format message: a scalar (value) or a block (children)."""

    def __init__(self, name, value=None, children=None, any_type=None):
        self.name = name
        self.value = value  # the scalar's token, strings unquoted and unescaped
        self.children = children
        self.any_type = any_type  # [type.googleapis.com/X] { ... }: X


TEXT_TOKEN = re.compile(
    r'(?P<space>\s+|#[^\n]*)'
    r'|(?P<any>\[[\w.]+/([\w.]+)\])'
    r'|(?P<list>\[[^\[\]]*\])'
    r'|(?P<string>"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\')'
    r'|(?P<cut>["\'][^\n]*$)'  # a string the fragment's end cuts short
    r'|(?P<variable>\$(?:\w+|\{[^}]*\}|\(\([^)]*\)\)))'  # a shell expansion
    r'|(?P<ident>[A-Za-z_]\w*)'
    r'|(?P<number>[-+]?\.?\d[\w.+-]*)'
    r'|(?P<punct>[{}<>:;,])', re.S)


def unescape(text):
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), text)


def parse_text(text):
    """Text format -> list of Nodes, or None when `text` is not text format.

    Text cut short (an open block, a field without its value) is read as far as
    it goes. A shell expansion ($x, ${x}, $((x))) is a value after `name:` and
    stands for whole fields elsewhere.
    """
    tokens = []
    pos = 0
    while pos < len(text):
        m = TEXT_TOKEN.match(text, pos)
        if m is None:
            return None
        pos = m.end()
        kind = m.lastgroup if m.lastgroup != "any" or m.group(3) is None else "any"
        if kind == "cut":
            break
        if kind != "space":
            tokens.append((kind, m.group(3) if kind == "any" else m.group(kind)))
    stack = [[]]
    i = 0

    def peek(offset=0):
        return tokens[i + offset] if i + offset < len(tokens) else (None, None)

    while i < len(tokens):
        kind, token = tokens[i]
        i += 1
        if kind == "punct" and token in ";," or kind == "variable":
            continue  # a shell variable where a field goes stands for fields
        if kind == "punct" and token in "}>":
            if len(stack) == 1:
                return None
            stack.pop()
            continue
        if kind not in ("ident", "any"):
            return None
        node = Node(token, any_type=token if kind == "any" else None)
        if peek() == ("punct", ":"):
            i += 1
            colon = True
        else:
            colon = False
        next_kind, next_token = peek()
        if next_kind == "punct" and next_token in "{<":
            i += 1
            node.children = []
            stack[-1].append(node)
            stack.append(node.children)
        elif next_kind is None:
            if colon:
                stack[-1].append(node)  # cut short before its value
        elif colon and kind == "ident" and next_kind in ("ident", "number", "list", "string",
                                                         "variable"):
            i += 1
            if next_kind == "string":
                parts = [next_token]
                while peek()[0] == "string":  # "a" "b" is "ab"
                    parts.append(peek()[1])
                    i += 1
                node.value = "".join(unescape(p[1:-1]) for p in parts)
            else:
                node.value = next_token
            stack[-1].append(node)
        else:
            return None
    return stack[0]


# --- Descriptors ------------------------------------------------------------


def load_messages(root, protos):
    """Full message name -> {"file": proto, "fields": {name: message type or None}}."""
    with tempfile.NamedTemporaryFile(suffix=".pb") as out:
        subprocess.run(
            ["protoc", "-I" + root, "-I/usr/include", "--include_imports",
             "--descriptor_set_out=" + out.name] + protos,
            check=True, cwd=root)
        with open(out.name, "rb") as binary:
            decoded = subprocess.run(
                ["protoc", "-I/usr/include", "--decode=google.protobuf.FileDescriptorSet",
                 "google/protobuf/descriptor.proto"],
                stdin=binary, check=True, capture_output=True, text=True).stdout
    descriptor_set = parse_text(decoded)
    if descriptor_set is None:
        raise ValueError("protoc's decoded FileDescriptorSet is not text format")

    def values(nodes, name):
        return [n.value for n in nodes if n.name == name]

    def blocks(nodes, name):
        return [n.children for n in nodes if n.name == name and n.children is not None]

    messages = {}

    def add(message, prefix, proto):
        full = prefix + "." + values(message, "name")[0]
        if any(values(options, "map_entry") == ["true"] for options in blocks(message, "options")):
            return
        fields = {}
        for field in blocks(message, "field"):
            is_message = values(field, "type") == ["TYPE_MESSAGE"]
            fields[values(field, "name")[0]] = (
                values(field, "type_name")[0].lstrip(".") if is_message else None)
        messages[full] = {"file": proto, "fields": fields}
        for nested in blocks(message, "nested_type"):
            add(nested, full, proto)

    for file in blocks(descriptor_set, "file"):
        package = (values(file, "package") or [""])[0]
        for message in blocks(file, "message_type"):
            add(message, package, values(file, "name")[0])
    return messages


# --- Finding where fields are set -------------------------------------------


class Coverage:
    def __init__(self, messages):
        self.messages = messages
        self.where = {}  # (message, field) -> the first file that sets it
        self.by_name = {}  # field name -> messages that have it
        for message, info in messages.items():
            for field in info["fields"]:
                self.by_name.setdefault(field, set()).add(message)

    def mark(self, candidates, field, path):
        """Marks `field` set in each of `candidates` that has it (None: any message)."""
        for message in self.by_name.get(field, ()):
            if candidates is None or message in candidates:
                self.where.setdefault((message, field), path)

    def child_types(self, candidates, field):
        """The possible types of `field { ... }` (None: unknown)."""
        types = {self.messages[m]["fields"][field] for m in self.by_name.get(field, ())
                 if candidates is None or m in candidates}
        types.discard(None)
        return types or None

    def resolve(self, nodes, candidates, path):
        if candidates is None:
            # The messages that have every field named here, if any do.
            names = [n.name for n in nodes if n.any_type is None]
            common = set(self.messages)
            for name in names:
                common &= self.by_name.get(name, set())
            candidates = common if names and common else None
        for node in nodes:
            if node.any_type is not None:
                self.resolve(node.children, {node.any_type}, path)
                continue
            self.mark(candidates, node.name, path)
            if node.children is not None:
                self.resolve(node.children, self.child_types(candidates, node.name), path)

    def scan_text(self, text, path, root=None, depth=0):
        """Marks what `text` sets if it reads as text format; returns whether it does."""
        nodes = parse_text(text)
        if nodes is None:
            return False
        self.resolve(nodes, None if root is None else {root}, path)
        if depth < 4:
            self.scan_strings(nodes, path, depth + 1)
        return True

    def scan_strings(self, nodes, path, depth):
        for node in nodes:
            if node.children is not None:
                self.scan_strings(node.children, path, depth)
            elif node.value is not None and node.value[:1] not in "[":
                self.scan_text(node.value, path, None, depth)


CPP_TOKEN = re.compile(
    r'(?P<comment>//[^\n]*|/\*.*?\*/)'
    r'|(?:u8|[uUL])?R"(?P<delimiter>[^(\s]*)\((?P<raw>.*?)\)(?P=delimiter)"'
    r'|(?:u8|[uUL])?"(?P<string>(?:[^"\\\n]|\\.)*)"'
    r"|(?P<char>'(?:[^'\\\n]|\\.)*')"
    r'|(?P<space>\s+)', re.S)


def scan_cpp(text, coverage, path):
    """String literals as text format; setters in the code."""
    code = []
    literal = None  # adjacent literals, joined as the compiler does

    def flush():
        nonlocal literal
        if literal is not None:
            coverage.scan_text(literal, path)
        literal = None

    pos = 0
    for m in CPP_TOKEN.finditer(text):
        if m.start() > pos:  # code between tokens ends a literal
            flush()
            code.append(text[pos:m.start()])
        pos = m.end()
        if m.group("raw") is not None or m.group("string") is not None:
            piece = m.group("raw") if m.group("raw") is not None else unescape(m.group("string"))
            literal = piece if literal is None else literal + piece
            code.append(" ")
        elif m.group("char") is not None:
            flush()
            code.append(" ")
        else:
            code.append(m.group("space") or " ")
    flush()
    code.append(text[pos:])
    code = "".join(code)
    # Setters count for the messages of the .proto files the test uses.
    used = set()
    for message, info in coverage.messages.items():
        header = info["file"][:-len(".proto")] + ".pb.h"
        if header in text or re.search(r"\b%s\b" % message.rsplit(".", 1)[1], code):
            used.add(info["file"])
    candidates = {m for m, info in coverage.messages.items() if info["file"] in used}
    for m in re.finditer(r"\b(?:set|mutable|add)_(\w+)\s*\(", code):
        coverage.mark(candidates, m.group(1), path)


SHELL_TOKEN = re.compile(
    r"(?P<comment>(?:^|(?<=\s))#[^\n]*)"
    r"|<<-?\s*(?P<quote>['\"]?)(?P<word>\w+)(?P=quote)[^\n]*\n(?P<heredoc>.*?)^\s*(?P=word)$"
    r"|'(?P<single>[^']*)'"
    r'|"(?P<double>(?:[^"\\]|\\.)*)"', re.S | re.M)


def scan_shell(text, coverage, path):
    """Quoted strings and here-documents as text format (see parse_text for $x)."""
    for m in SHELL_TOKEN.finditer(text):
        if m.group("heredoc") is not None:
            coverage.scan_text(m.group("heredoc"), path)
        elif m.group("single") is not None:
            coverage.scan_text(m.group("single"), path)
        elif m.group("double") is not None:
            coverage.scan_text(unescape(m.group("double")), path)


PYTHON_STRING = re.compile(
    r'(?P<comment>#[^\n]*)'
    r'|(?P<q>"""|\'\'\')(?P<long>.*?)(?P=q)'
    r'|"(?P<double>(?:[^"\\\n]|\\.)*)"|\'(?P<single>(?:[^\'\\\n]|\\.)*)\'', re.S)


def scan_python(text, coverage, path):
    for m in PYTHON_STRING.finditer(text):
        for group in ("long", "double", "single"):
            if m.group(group) is not None:
                coverage.scan_text(unescape(m.group(group)), path)


# --- The check ----------------------------------------------------------------


def walk(root):
    """Repository-relative paths of every file, bazel-* and SKIPPED_DIRS left out."""
    for directory, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.startswith("bazel-"))
        for name in sorted(files):
            yield os.path.relpath(os.path.join(directory, name), root)


def is_spec(path):
    parts = path.split(os.sep)
    return path.endswith(".textproto") and (parts[0] == "experiments" or "testdata" in parts)


def is_test(path):
    return re.search(r"_test\.(cc|sh|py)$", path) is not None


def read_allowlist(path):
    """Field -> reason, and the errors of malformed lines."""
    entries, errors = {}, []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            field, _, reason = line.partition(" ")
            if not reason.strip():
                errors.append("%s:%d: %s has no reason" % (ALLOWLIST, number, field))
            if field in entries:
                errors.append("%s:%d: %s is listed twice" % (ALLOWLIST, number, field))
            entries[field] = reason.strip()
    return entries, errors


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(
        os.path.realpath(__file__))), help="the repository (default: this file's)")
    parser.add_argument("--list", action="store_true",
                        help="print every field with the first file that sets it")
    args = parser.parse_args()
    root = args.root
    files = list(walk(root))
    protos = sorted(p for p in files if p.endswith("_options.proto")) + ["fl/spec.proto"]
    try:
        context = [p for p in CONTEXT_PROTOS if os.path.exists(os.path.join(root, p))]
        messages = load_messages(root, protos + context)
    except (OSError, ValueError, subprocess.CalledProcessError) as e:
        print("option_coverage: cannot read the descriptors: %s" % e, file=sys.stderr)
        return 2
    targets = sorted((m, f) for m, info in messages.items() if info["file"] in protos
                     for f in info["fields"])
    coverage = Coverage(messages)
    scanned = 0
    for path in files:
        if not (is_spec(path) or is_test(path)):
            continue
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            text = f.read()
        scanned += 1
        if is_spec(path):
            root_type = SWEEP_ROOT if path.endswith(".sweep.textproto") else SPEC_ROOT
            if not coverage.scan_text(text, path, root_type):
                print("option_coverage: %s does not read as text format" % path, file=sys.stderr)
                return 2
        elif path.endswith(".cc"):
            scan_cpp(text, coverage, path)
        elif path.endswith(".sh"):
            scan_shell(text, coverage, path)
        else:
            scan_python(text, coverage, path)

    if args.list:
        for target in targets:
            print("%-70s %s" % ("%s.%s" % target, coverage.where.get(target, "-")))
    allowed, errors = read_allowlist(os.path.join(root, ALLOWLIST))
    names = {"%s.%s" % t: t for t in targets}
    for name in sorted(set(allowed) - set(names)):
        errors.append("%s is listed but is no option field (renamed or removed?)" % name)
    uncovered = []
    for name, target in sorted(names.items()):
        where = coverage.where.get(target)
        if where is None and name not in allowed:
            uncovered.append("  %s  (%s)" % (name, messages[target[0]]["file"]))
        elif where is not None and name in allowed:
            errors.append("%s is listed but %s sets it now: remove it from %s" %
                          (name, where, ALLOWLIST))
    if uncovered:
        errors.append("option fields that no test or spec sets (set one in a test, or list it "
                      "with a reason in %s):\n%s" % (ALLOWLIST, "\n".join(uncovered)))
    print("option_coverage: %d fields of %d .proto files, %d tests and specs scanned, %d listed "
          "as uncovered" % (len(targets), len(protos), scanned, len(allowed)))
    for error in errors:
        print("option_coverage: " + error)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
