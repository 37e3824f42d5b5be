"""Text that came from the candidate, made safe to store and to show.

Anything the worker sends (an exception, a class name, a process's command line) or
prints (its stderr) is written by the candidate, and it reaches verdict reasons, the
history digest, an LLM's prompt and a terminal. `candidate_text` is the one place such
text is cleaned: terminal escape sequences and every control or invisible formatting
character (bidirectional overrides, zero-width characters) are removed, the text is cut
to a length, and, on one line, it is quoted in «…» so a reader (or a model) sees where
the candidate's words begin and end. The quote marks themselves are replaced inside.
"""

from __future__ import annotations

import re
import unicodedata

REASON_CHARS = 300  # one reason line
LOG_CHARS = 3000  # the worker's stderr tail kept in a record

# CSI (ESC [ … final), OSC (ESC ] … BEL or ST), other two-byte ESC sequences, and the
# 8-bit CSI/OSC introducers.
_ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]?"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[@-Z\\-_]?"
    r"|[\x9b\x9d][0-?]*[ -/]*[@-~]?"
)
# Unicode categories that print nothing a reader can see: controls, formatting
# (bidi overrides, zero-width), surrogates, private use, unassigned, line/paragraph separators.
_INVISIBLE = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}


def visible(ch: str) -> bool:
    return unicodedata.category(ch) not in _INVISIBLE


def _strip(text: str, keep_newlines: bool) -> str:
    text = _ANSI.sub("", text)
    out = []
    for ch in text:
        if ch == "\n" and keep_newlines:
            out.append(ch)
        elif ch in "\t\r\n\v\f" or unicodedata.category(ch) in ("Zl", "Zp"):
            out.append(" ")
        elif visible(ch):
            out.append(ch)
    return "".join(out)


def candidate_text(text: object, limit: int = REASON_CHARS, *, multiline: bool = False) -> str:
    """`text` from the candidate, cleaned and cut to `limit` characters.

    One line (the default): whitespace runs collapse to one space and the result is
    quoted, «like this». `multiline=True` (a log tail) keeps newlines, keeps the END of
    the text (the last lines say what failed) and adds no quotes.
    """
    if not isinstance(text, str):
        text = repr(text) if text is not None else ""
    if multiline:
        # Cut before cleaning too, so megabytes are never scanned character by character.
        raw = text[-(limit * 4) :]
        lines = [ln.rstrip() for ln in _strip(raw, True).split("\n")]
        cleaned = "\n".join(lines).strip("\n")
        if len(cleaned) > limit:
            cleaned = "[…cut] " + cleaned[-(limit - 7) :]
        return cleaned
    raw = text[: limit * 4]
    cleaned = " ".join(_strip(raw, False).split())
    cleaned = cleaned.replace("«", '"').replace("»", '"')
    if len(cleaned) > limit or len(text) > len(raw):
        cleaned = cleaned[: limit - 1] + "…"
    return f"«{cleaned}»"


def last_line(text: object, limit: int = REASON_CHARS) -> str:
    """The last non-empty line of the candidate's text (a traceback's exception line), quoted."""
    if not isinstance(text, str):
        text = "" if text is None else repr(text)
    # A line longer than the limit is cut anyway; look at enough of the tail to find it.
    tail = candidate_text(text[-(limit * 8) :], limit * 8, multiline=True)
    lines = [ln for ln in tail.splitlines() if ln.strip()]
    if not lines:
        return "«(no message)»"
    return candidate_text(lines[-1], limit)


# The exception line that ends a traceback: `pkg.mod.SomeError: message` at column 0.
_EXC_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Failure|Assertion)\b[^\n]*$")
# Exceptions a kernel compiler raises: Triton's front end and back end (CompilationError,
# its subclasses, PTXASError), and torch.utils.cpp_extension's failed builds.
_COMPILER = re.compile(
    r"(CompilationError|CompileTimeAssertionFailure|UnsupportedLanguageConstruct|PTXASError"
    r"|Error building extension)"
)
COMPILER_CHARS = 600
_BUILD = re.compile(r"Error building extension '[^']*'")
# gcc/clang/nvcc diagnostics: `file.cpp:11:23: error: …`, `file.cu(12): error: …`
_CXX_ERROR = re.compile(r"(:\d+(:\d+)?: (fatal )?error|\(\d+\): error)")
_PATH = re.compile(r"^\S*/(?=[^/\s]+(:\d+|\(\d+\)))")


def compiler_lines(text: object, limit: int = COMPILER_CHARS) -> str | None:
    """The first lines of a compiler error in the candidate's traceback, quoted on one line
    (`«CompilationError: at 12:8: x = tl.load(ptr + offs, mask=m) ^ … incompatible types»`),
    or None when no exception in it is a compiler's. Triton's message is the source
    excerpt ending in a caret, then the error: the line above the caret, the caret and
    what follows are kept; for a C++ build, the first lines that say `error`."""
    if not isinstance(text, str):
        return None
    lines = text[-16000:].splitlines()
    at = max(
        (i for i, ln in enumerate(lines) if _EXC_LINE.match(ln) and _COMPILER.search(ln)),
        default=None,
    )
    if at is None:
        return None
    head, rest = lines[at], [ln for ln in lines[at + 1 :] if ln.strip()]
    name, _, msg = head.partition(":")
    if (build := _BUILD.search(msg)) is not None:
        # torch.utils.cpp_extension: the message is ninja's whole log (compiler command
        # lines first); keep the extension's name and the compiler's `error:` lines, with
        # the sandbox's build path cut to the file name.
        msg = f" {build.group(0)}:"
        # (a dispatch macro instantiates the same code per dtype: one error, several times)
        errors = list(
            dict.fromkeys(_PATH.sub("", ln.strip()) for ln in rest if _CXX_ERROR.search(ln))
        )
        body = errors[:4] or [ln.strip() for ln in rest if "error" in ln.lower()][:4]
        return candidate_text(" ".join([f"{name.rsplit('.', 1)[-1]}:{msg}", *body]), limit)
    caret = next((i for i, ln in enumerate(rest) if ln.strip() == "^"), None)
    if caret is not None:
        body = rest[max(caret - 1, 0) :]
    else:
        errors = [ln for ln in rest if "error" in ln.lower()]
        body = (errors or rest)[:4]
    return candidate_text(" ".join([f"{name.rsplit('.', 1)[-1]}:{msg}", *body]), limit)


def import_reason(text: object) -> str:
    """Why a worker could not import an implementation: the compiler's first error lines
    when a build or kernel compile failed (compiler_lines), else the exception's last line."""
    return compiler_lines(text) or last_line(text)


# A traceback frame: `  File "/x/impl/candidate.py", line 27, in _kernel` then its code line.
_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)\s*$')
_LIBRARY = ("/site-packages/", "/dist-packages/", "/kernelloop/", "/lib/python", "<frozen")


def candidate_frame(text: object) -> str:
    """Where in the candidate's own file an exception was raised — its last traceback frame
    outside the libraries (in the Triton interpreter, a line of the `@triton.jit` kernel) —
    as `; at line N in FN: `CODE``, or "" when the traceback has none."""
    if not isinstance(text, str):
        return ""
    lines = text[-16000:].splitlines()
    found = ""
    for i, ln in enumerate(lines):
        m = _FRAME.match(ln)
        if m is None or any(lib in m.group(1) for lib in _LIBRARY):
            continue
        code = lines[i + 1].strip() if i + 1 < len(lines) else ""
        code = "" if _FRAME.match(code) else code
        found = f"; at line {m.group(2)} in {candidate_text(m.group(3), 60)}" + (
            f": {candidate_text(code, 160)}" if code else ""
        )
    return found
