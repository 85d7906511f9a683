"""Is a CHECK command a fingerprint of the data (a hash, a size, a copy) or analysis?

Why. A verification reward pays for checks that pass on the data and fail on data with
another answer. The cheapest such checks are fingerprints -- an md5 of the file, its
byte or line count, a comparison with a copy, its inode or mtime -- and a task-blind
policy that pinned them out-earned the reference solution on every task, without
reading the question (``benchmarks/no_analysis.py`` writes those policies down).
Strength testing refuses most of them, but a policy under RL pressure searches for
whatever still pays, so a learning run counts the nodes made only of fingerprints
(`vera_env.evaluation.integrity`).

``fingerprint_kind`` reads a CHECK command with a small shell parser (words, quotes,
pipes, ``$(...)``, ``<(...)``, ``$((...))``, redirections) and classifies each pipeline
by the commands it runs, so ``grep -c x f | awk ...`` (a count of matches: analysis)
and ``wc -l < <(grep x f)`` (a count of selected lines: analysis) are told from
``wc -l f`` (a count of the whole file: a fingerprint). The rules, most telling first:

* ``copy``: ``cmp``/``diff`` of a file and its copy (same base name), ``test A -ef B``,
  or two substitutions that differ only in a path (``"$(md5sum < f)" = "$(md5sum <
  keep/f)"``);
* ``hash``: a pipeline through a digest (``md5sum``, ``sha*sum``, ``b2sum``,
  ``cksum``, Python ``hashlib``/``zlib.crc32``), whatever was piped into it (``cut -f1 |
  sort | md5sum`` too): no question is answered by a digest;
* ``metadata``: ``stat`` of anything but the size, ``find -newer``/``-inum``,
  ``date -r``, ``os.stat(...).st_mtime``: inode, link, time and mode pins;
* ``listing``: ``ls``, ``find`` without a test of content: names, sizes, order;
* ``bytes``: ``head -c``/``tail -c``/``od``/``xxd`` of the whole (decoded) file;
* ``size``: ``wc`` (or ``awk 'END{print NR}'``, ``stat -c %s``, ``du``) of a whole
  file, decoded, sorted or de-duplicated, with at most header lines removed
  (``grep -v '^#'``) or only digits or spaces kept (``tr -cd 0-9``). A count of every
  record of a file is the no-analysis policies' favourite pin
  (``grep -avc '^[#@%>]'``); a question whose answer is "all the records" is rare and
  would still be answered by a node with an analysis check beside it.

A pipeline that selects by content (``grep PATTERN``, ``awk``, ``cut``, ``sed``, ``head
-n``, Python without a digest, any tool this list does not know) and ends in no digest
is analysis, and one analysis pipeline anywhere makes the whole check analysis
(``None``): the classifier
errs towards "analysis", so the fingerprint share is a lower bound. A check that reads
a file an earlier command of its node wrote (``test "$(cat fact0.txt)" = ...``) is
classified by that command (``context``).

Entropy checks (clock, ``/dev/urandom``) are not fingerprints of the data; strength
tests refuse them, and they are not counted here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["FINGERPRINT_KINDS", "FingerprintKind", "fingerprint_kind"]

FingerprintKind = Literal["copy", "hash", "metadata", "listing", "bytes", "size"]
FINGERPRINT_KINDS: tuple[FingerprintKind, ...] = ("copy", "hash", "metadata", "listing", "bytes",
                                                  "size")
"""Every kind, most telling first: a check that is several is reported as the first."""

_HASHES = frozenset({"md5sum", "sha1sum", "sha224sum", "sha256sum", "sha384sum", "sha512sum",
                     "b2sum", "cksum", "sum", "shasum", "xxhsum", "xxh64sum", "crc32", "md5"})
_SOURCES = frozenset({"cat", "zcat", "gzcat", "bzcat", "xzcat", "zstdcat", "gunzip", "gzip",
                      "bgzip", "pigz", "bunzip2", "xz", "zstd"})
_NEUTRAL = frozenset({"test", "[", "[[", "echo", "printf", "true", "false", "exit", "return",
                      "sleep", ":", "bc", "expr", "let", "cd", "mkdir", "cp", "mv", "rm",
                      "touch", "export", "local", "read", "for", "while", "until", "case",
                      "wait", "done", "fi", "esac", "{", "}", "!"})
_KEYWORDS = frozenset({"do", "then", "else", "elif", "if", "time"})
_BYTES = frozenset({"od", "xxd", "hexdump", "file"})
_HEADER_PATTERN = re.compile(r"^\^(\[[#@%>!;]+\]|[#@%>!;]{1,2})$")
_ONLY_DIGITS_OR_SPACE = re.compile(r"^(0-9|\[:digit:\]|\[:space:\]|\\n|\\t|\\r| |\s)+$")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")

PipelineKind = Literal["copy", "hash", "metadata", "listing", "bytes", "size", "whole",
                       "analysis", "neutral"]


@dataclass(slots=True)
class _Stage:
    """One simple command of a pipeline (a parse node, built once and then only read)."""

    words: list[str] = field(default_factory=list)
    subs: list[_Group] = field(default_factory=list)
    stdin: _Group | str | None = None
    discarded: bool = False  # stdout goes to /dev/null: nothing is pinned


@dataclass(slots=True)
class _Group:
    """A command list: the whole check, or the inside of ``$(...)``/``<(...)``."""

    text: str
    pipelines: list[list[_Stage]]
    arith: bool = False


class _Parser:
    """A parser of the shell that CHECK lines use; it never fails (text is data)."""

    def __init__(self, text: str, arith: bool = False) -> None:
        self.s, self.i, self.arith = text, 0, arith
        self.word: list[str] = []
        self.has_word = False

    def group(self, closer: str = "", arith: bool = False) -> _Group:
        start = self.i
        pipelines: list[list[_Stage]] = [[_Stage()]]
        redirect = ""
        while self.i < len(self.s):
            c, rest = self.s[self.i], self.s[self.i:]
            if closer and c == ")" and (closer == ")" or rest.startswith("))")):
                self._end_word(pipelines[-1][-1], redirect)
                text, self.i = self.s[start:self.i], self.i + len(closer)
                return _Group(text, [p for p in pipelines if any(st.words for st in p)], arith)
            if c in " \t" or c in "|;&\n<>":
                redirect = self._end_word(pipelines[-1][-1], redirect)
            if c in "$<(" and self._nested(rest, pipelines[-1][-1], redirect):
                redirect = ""
                continue
            if c in "|;&\n":
                two = rest[:2]
                if c == "|" and two != "||":
                    pipelines[-1].append(_Stage())
                else:
                    pipelines.append([_Stage()])
                self.i += 2 if two in ("||", "&&", ";;") else 1
            elif c in "<>":
                redirect = self._redirect(rest)
            else:
                self._text(c, pipelines[-1][-1], redirect)
        self._end_word(pipelines[-1][-1], redirect)
        return _Group(self.s[start:], [p for p in pipelines if any(st.words for st in p)], arith)

    def _nested(self, rest: str, stage: _Stage, redirect: str) -> bool:
        """Parse ``$((``, ``$(``, ``<(`` or ``(`` at the cursor; False when none starts."""
        for opener, closer in (("$((", "))"), ("$(", ")"), ("<(", ")"), ("(", ")")):
            if rest.startswith(opener):
                self.i += len(opener)
                inner_arith = opener == "$((" or (opener == "(" and self.arith)
                inner = _Parser(self.s, inner_arith)
                inner.i = self.i
                sub = inner.group(closer, arith=inner_arith)
                self.i = inner.i
                if opener == "<(" and redirect == "<":
                    stage.stdin = sub
                else:
                    stage.subs.append(sub)
                    self.word.append(opener + closer)
                    self.has_word = True
                return True
        return False

    def _redirect(self, rest: str) -> str:
        if self.word and "".join(self.word).isdigit():  # 2> : the fd is not a word
            self.word, self.has_word = [], False
        op = re.match(r"<<<|<<|>>|>&|<|>", rest)
        assert op is not None
        self.i += len(op.group())
        return "<" if op.group() == "<" else ">"

    def _text(self, c: str, stage: _Stage, redirect: str) -> None:
        if c in " \t":
            self.i += 1
        elif c == "#" and not self.has_word:
            end = self.s.find("\n", self.i)
            self.i = len(self.s) if end < 0 else end
        elif c == "'":
            end = self.s.find("'", self.i + 1)
            end = len(self.s) if end < 0 else end
            self.word.append(self.s[self.i + 1:end])
            self.has_word, self.i = True, end + 1
        elif c == '"':
            end = _closing_quote(self.s, self.i + 1)
            if "$(" in self.s[self.i + 1:end]:  # parse the substitutions inside
                self.i += 1
            else:
                self.word.append(self.s[self.i + 1:end].replace('\\"', '"'))
                self.has_word, self.i = True, end + 1
        else:
            if c == "\\" and self.i + 1 < len(self.s):
                self.i += 1
                c = self.s[self.i]
            self.word.append(c)
            self.has_word, self.i = True, self.i + 1

    def _end_word(self, stage: _Stage, redirect: str) -> str:
        if self.has_word:
            word = "".join(self.word)
            if redirect == "<":
                stage.stdin = word
            elif redirect == ">":
                stage.discarded = word == "/dev/null"
            else:
                stage.words.append(word)
            self.word, self.has_word = [], False
            return ""
        return redirect


def _closing_quote(s: str, i: int) -> int:
    while i < len(s) and s[i] != '"':
        i += 2 if s[i] == "\\" else 1
    return min(i, len(s))


def _command(stage: _Stage) -> tuple[str, list[str]]:
    """The command's name (base name, keywords and assignments skipped) and arguments."""
    words = list(stage.words)
    while words and (words[0] in _KEYWORDS or _ASSIGNMENT.match(words[0])
                     or words[0] in ("env", "command", "exec", "nice")):
        words.pop(0)
    return (words[0].rsplit("/", 1)[-1], words[1:]) if words else ("", [])


def _flags(args: Sequence[str]) -> str:
    return "".join(a[1:] for a in args if a.startswith("-") and not a.startswith("--"))


def _operands(args: Sequence[str]) -> list[str]:
    return [a for a in args if not a.startswith("-")]


def _python_kind(code: str) -> PipelineKind:
    if re.search(r"\bhashlib\b|zlib\.(crc32|adler32)", code):
        return "hash"
    if re.search(r"st_size|getsize", code):
        return "size"
    if re.search(r"\bos\.(l?stat)\b|st_(mtime|ctime|atime|ino|nlink)|get[mca]time", code):
        return "metadata"
    return "analysis"


def _stat_kind(args: Sequence[str]) -> PipelineKind:
    fmt = next((args[k + 1] for k, a in enumerate(args[:-1]) if a in ("-c", "--printf")),
               next((a.split("=", 1)[1] for a in args if a.startswith("--format=")), ""))
    return "size" if fmt and set(re.findall(r"%(\w)", fmt)) <= {"s", "n"} else "metadata"


def _stage_kind(stage: _Stage) -> str:
    """A stage's role: a fingerprint kind, ``count``, ``whole``, ``select`` or ``neutral``."""
    name, args = _command(stage)
    flags = _flags(args)
    if name in _HASHES:
        return "hash"
    if name.startswith("python"):
        code = args[args.index("-c") + 1] if "-c" in args[:-1] else ""
        return _python_kind(code)
    if name == "stat":
        return _stat_kind(args)
    if name == "ls" or (name == "find" and not {"-exec", "-execdir"} & set(args)):
        tests = {"-newer", "-mtime", "-mmin", "-ctime", "-cmin", "-inum", "-samefile"}
        return "metadata" if tests & set(args) or any(a.startswith("-newer") for a in args) \
            else "size" if "-size" in args else "listing"
    if name == "du" or (name == "date" and ("-r" in args or "--reference" in args)):
        return "size" if name == "du" else "metadata"
    if name in ("cmp", "diff"):
        names = [o.rsplit("/", 1)[-1] for o in _operands(args)]
        return "copy" if len(names) == 2 and names[0] == names[1] else "select"
    if name in ("test", "[", "[[") and "-ef" in args:
        return "copy"
    if name in ("test", "[", "[[") and ("-nt" in args or "-ot" in args):
        return "metadata"
    return _filter_kind(name, args, flags)


def _filter_kind(name: str, args: Sequence[str], flags: str) -> str:
    """Stages that read a stream: sources, whole-file transforms, counts, selections."""
    if name == "wc":
        return "count"
    if name in _SOURCES:
        return "whole" if name != "gzip" or "d" in flags or "c" in flags else "select"
    if name == "sort":
        return "select" if "u" in flags and ("k" in flags or "t" in flags) else "whole"
    if name == "uniq":
        return "select" if flags else "whole"
    if name == "tr":
        sets = _operands(args)
        keep = "d" in flags and sets and _ONLY_DIGITS_OR_SPACE.match(sets[0])
        return "whole" if keep else "select"
    if name in ("head", "tail"):
        return "bytes" if "c" in flags or any(a.startswith("--bytes") for a in args) else "select"
    if name == "grep":
        pattern = next((a for a in _operands(args)), "")
        if "v" in flags and _HEADER_PATTERN.match(pattern):
            return "count" if "c" in flags else "whole"
        return "select"
    if name == "awk" and re.sub(r"\s", "", next(iter(_operands(args)), "")) == "END{printNR}":
        return "count"
    if name in _BYTES:
        devices = all(o.startswith(("/dev/", "/proc/")) for o in _operands(args))
        return "neutral" if _operands(args) and devices else "bytes"
    if name in _NEUTRAL or name == "date" or not name:
        return "neutral"
    return "select"


def _pipeline_kind(stages: Sequence[_Stage]) -> PipelineKind:
    roles = [_stage_kind(st) for st in stages]
    if stages[-1].discarded and "copy" not in roles:
        return "neutral"
    if "hash" in roles or "copy" in roles:
        return "hash" if "hash" in roles else "copy"
    first = next((r for r in roles if r != "neutral"), "neutral")
    if first == "metadata" or first == "listing":
        return "metadata" if first == "metadata" else "listing"
    if first == "size" and roles[0] == "size":
        return "size"
    upstream_whole, cut = True, False
    for stage, role in zip(stages, roles, strict=True):
        if isinstance(stage.stdin, _Group):
            upstream_whole = upstream_whole and all(
                _pipeline_kind(p) == "whole" for p in stage.stdin.pipelines)
        if role in ("count", "size"):
            return "size" if upstream_whole else "analysis"
        if role == "select" or not upstream_whole:
            return "analysis"
        cut = cut or role == "bytes"
    return "bytes" if cut else "whole" if "whole" in roles else "neutral"


def _pipelines(group: _Group) -> Iterator[list[_Stage]]:
    """Every pipeline the group runs, nested ones included (arithmetic's own words not)."""
    for pipeline in group.pipelines:
        if not group.arith:
            yield pipeline
        for stage in pipeline:
            for sub in stage.subs:
                yield from _pipelines(sub)
            if isinstance(stage.stdin, _Group):
                yield from _pipelines(stage.stdin)


def _subgroups(group: _Group) -> Iterator[_Group]:
    for pipeline in group.pipelines:
        for stage in pipeline:
            for sub in stage.subs:
                yield sub
                yield from _subgroups(sub)


def _compares_copies(group: _Group) -> bool:
    """Two substitutions that run the same thing on paths with one base name."""
    seen: dict[str, str] = {}
    for sub in _subgroups(group):
        key = re.sub(r"[\w.\-]*/([\w.\-]+)", r"\1", sub.text).strip()
        if key in seen and seen[key] != sub.text.strip() and re.search(r"[\w-]\.\w", key):
            return True
        seen.setdefault(key, sub.text.strip())
    return False


def _resolve_derived(command: str, context: str) -> str:
    """``cat NAME`` of a file that ``context`` wrote (``SHELL > NAME``) becomes SHELL."""
    for part in re.split(r";|&&|\n", context):
        written = re.match(r"\s*(.+?)\s*>\s*([\w.\-/]+)\s*$", part)
        if written:
            shell, name = written.groups()
            command = re.sub(rf"\bcat\s+{re.escape(name)}(?![\w.\-])",
                             shell.replace("\\", "\\\\"), command)
    return command


def fingerprint_kind(command: str, context: str = "") -> FingerprintKind | None:
    """The kind of fingerprint of the data a CHECK command pins, or None for analysis.

    Args:
        command: The check's shell command.
        context: The command of the check's node (its turn's ``<command>``), which may
            have written the files the check reads.

    Returns:
        ``"copy"``, ``"hash"``, ``"metadata"``, ``"listing"``, ``"bytes"`` or ``"size"``
        (see the module docstring); None when any part of it analyses the data, or when
        it reads no data at all.

    Example:
        >>> fingerprint_kind("test $(wc -l < data.tsv) -eq 6 && echo True")
        'size'
        >>> fingerprint_kind("test $(grep -c chr1 data.tsv) -eq 6 && echo True") is None
        True
    """
    group = _Parser(_resolve_derived(command, context) if context else command).group()
    kinds = {_pipeline_kind(p) for p in _pipelines(group)}
    if "analysis" in kinds:
        return None
    if _compares_copies(group):
        return "copy"
    return next((k for k in FINGERPRINT_KINDS if k in kinds), None)
