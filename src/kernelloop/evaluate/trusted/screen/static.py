"""The static screen: what a candidate's source may name, checked before a worker starts.

It runs on the trusted side over the candidate's AST, so a rejection costs milliseconds
and no untrusted code runs. It is a **policy and a cheap early filter, not a boundary**:
Python reaches anything through enough indirection, so everything it forbids also has a
runtime defence (the sandbox's privileges, the trusted side's checks; docs/cheats.md).
It is an allow-list: a Triton candidate needs `torch` to allocate, `triton` /
`triton.language` for kernels and a few pure-Python helpers; anything else it names is a
finding. Every rule, with why, is in docs/evaluate.md ("Static screen").

Rules (each finding is one sentence with the line; `Finding.rule` names the rule):
- import: only the language's allowed modules; no relative or `*` imports;
- attribute / import: `torch.X` only allocation, dtypes, device queries (per language);
  `triton.X` only `jit`, `autotune`, `heuristics`, `Config`, `cdiv`, `next_power_of_2`
  and `triton.language`; no private names of any module; no `operator.attrgetter` /
  `methodcaller`, `typing.get_type_hints` / `ForwardRef` (they turn strings into attribute
  access or code);
- name: builtins that reach code or harness state (eval, exec, compile, open,
  __import__, getattr, setattr, …) unless a function's own local of that name;
  `getattr(obj, "constant_public_name"[, default])` is allowed and checked as `obj.name`;
- name / attribute: dunders (frames, globals, subclasses, dicts), frame attributes,
  private attributes except on `self`/`cls`, `.numpy()`/`.tolist()` and storage access;
- string: a string that spells an attribute path through a dunder (`"__globals__"`), a
  format template that reads private attributes, a string annotation with any finding;
- assignment: assigning to or deleting an attribute of an imported module (monkeypatching);
- module: a module used as a value (`t = torch`, `c = torch.cuda`, `f(torch)`);
- class: classes derived from torch/triton types; `type(name, bases, dict)`;
- cpp (`language = "cuda"`): C++/CUDA sources in the module's strings (static_cpp.py).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from kernelloop import pyast
from kernelloop.evaluate.trusted.screen.static_cpp import cpp_module_findings
from kernelloop.evaluate.trusted.screen.static_paths import (
    dotted_path,
    path_problem,
    public_attribute,
    string_problems,
)
from kernelloop.evaluate.trusted.screen.static_rules import (
    ALLOWED_DUNDERS,
    COMMON_MODULES,
    FORBIDDEN_BUILTINS,
    FRAME_ATTRS,
    HIDDEN_WORK_ATTRS,
    INIT_FACTORIES,
    LANG_MODULES,
    MODULE_PATHS,
)
from kernelloop.evaluate.trusted.screen.static_scope import (
    function_locals,
    module_inits,
    string_annotations,
)


@dataclass(frozen=True)
class Finding:
    line: int
    rule: str  # syntax | import | name | attribute | string | module | assignment | class | cpp
    message: str

    def render(self) -> str:
        return f"line {self.line}: {self.message}"


def screen_source(source: str, language: str = "triton", draws: bool = False) -> list[Finding]:
    """Every finding in a candidate's source, in line order; [] means it may run. `draws`:
    the task's model draws random numbers (Task.draws), and torch's seeding and random
    fills (TORCH_RNG) are allowed too."""
    try:
        tree = pyast.parse(source)
    except SyntaxError as e:
        return [
            Finding(e.lineno or 0, "syntax", f"the source does not parse ({e.msg}); fix the syntax")
        ]
    return _Screen(language, draws).run(tree, source)


def screen_candidate(
    source: bytes, language: str, baseline: bytes | None, draws: bool = False
) -> list[Finding]:
    """The screen as a command applies it: none for the bytes of the task's own baseline
    (`baseline`), which is the task author's code, not an agent's — an imported KernelBench
    model may use what its problem file imports (einops, numpy, collections.abc), and it
    still runs in the sandbox like everything else; the screen is a policy for candidates."""
    if baseline is not None and source == baseline:
        return []
    return screen_source(source.decode(errors="replace"), language, draws)


def allowed_modules(language: str) -> tuple[str, ...]:
    return (*LANG_MODULES.get(language, LANG_MODULES["triton"]), *COMMON_MODULES)


def _const_str(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


class _Screen:
    def __init__(self, language: str, draws: bool = False) -> None:
        self.language = language if language in LANG_MODULES else "triton"
        self.draws = draws
        self.modules = allowed_modules(self.language)
        self.aliases: dict[str, str] = {}  # local name -> dotted path it was imported as
        self.findings: dict[tuple[int, str], Finding] = {}
        self.locals: set[int] = set()  # Name nodes that are a function's local, not the builtin
        self.getattr_ok: set[int] = set()  # `getattr` Name nodes of allowed constant-name calls
        self.in_init: set[int] = set()  # nodes inside an nn.Module's __init__ (INIT_FACTORIES)

    def add(self, node: ast.AST, rule: str, message: str) -> None:
        line = getattr(node, "lineno", 0)
        self.findings.setdefault((line, message), Finding(line, rule, message))

    def run(self, tree: ast.Module, source: str) -> list[Finding]:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                self._import(node)
        self.locals = function_locals(source, tree, FORBIDDEN_BUILTINS)
        self.in_init = module_inits(tree, self._dotted)
        self._check(tree)
        for const in string_annotations(tree):
            self._annotation(const)
        if self.language == "cuda":
            self._cpp(tree)
        return sorted(self.findings.values(), key=lambda f: (f.line, f.message))

    def _check(self, tree: ast.AST) -> None:
        for node in ast.walk(tree):  # first, so that paths through getattr resolve below
            if isinstance(node, ast.Call):
                self._getattr(node)
        # Expressions whose attribute is taken (`x.a`, or `getattr(x, "a")` when allowed).
        bases = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        bases |= {
            id(n.args[0])
            for n in ast.walk(tree)
            if isinstance(n, ast.Call) and id(n.func) in self.getattr_ok
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                self._call(node, id(node) in bases)
            elif isinstance(node, ast.Name):
                self._name(node, id(node) in bases)
            elif isinstance(node, ast.Attribute):
                self._attribute(node, id(node) in bases)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                for why in string_problems(node.value):
                    self.add(node, "string", why)
            elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete):
                targets = (
                    node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
                )
                for t in targets:
                    self._target(t)
            elif isinstance(node, ast.ClassDef):
                for b in node.bases:
                    path = self._dotted(b)
                    # An nn.Module (a KernelBench-style `ModelNew`) changes no tensor's
                    # behaviour; a Tensor (or any other torch/triton) subclass could.
                    if (
                        path
                        and path != "torch.nn.Module"
                        and path.split(".")[0]
                        in (
                            "torch",
                            "triton",
                        )
                    ):
                        self.add(
                            node,
                            "class",
                            f"class {node.name} derives from {path}; return plain torch.Tensor "
                            "outputs and use no torch/triton subclasses",
                        )

    def _init_factory(self, node: ast.AST, path: str) -> bool:
        parts = path.split(".")
        if id(node) not in self.in_init or parts[0] != "torch":
            return False
        if len(parts) == 2:
            return parts[1] in INIT_FACTORIES
        return parts[1:3] == ["nn", "init"] and len(parts) == 4 and not parts[3].startswith("_")

    def _annotation(self, const: ast.Constant) -> None:
        """A string annotation is code to `typing.get_type_hints`: screen it as code."""
        try:
            sub = pyast.parse(const.value.strip(), mode="eval")
        except SyntaxError:
            self.add(
                const,
                "string",
                "has a string annotation that is not a Python expression; write the annotation "
                "without quotes",
            )
            return
        for node in ast.walk(sub):
            ast.copy_location(node, const)
        self._check(sub)

    # ---- imports -----------------------------------------------------------------
    def _module_ok(self, module: str) -> bool:
        if self.language == "triton" and (
            module == "triton.language" or module.startswith("triton.language.")
        ):
            return not any(part.startswith("_") for part in module.split("."))
        return module in self.modules

    def _import(self, node: ast.Import | ast.ImportFrom) -> None:
        allowed = ", ".join(self.modules)
        if isinstance(node, ast.Import):
            for a in node.names:
                if not self._module_ok(a.name):
                    self.add(
                        node,
                        "import",
                        f"imports `{a.name}`, which a {self.language} candidate may not use "
                        f"(allowed: {allowed})",
                    )
                    continue
                self.aliases[a.asname or a.name.split(".")[0]] = (
                    a.name if a.asname else a.name.split(".")[0]
                )
            return
        if node.level:
            self.add(
                node, "import", "uses a relative import; a candidate is one self-contained file"
            )
            return
        module = node.module or ""
        if not self._module_ok(module):
            self.add(
                node,
                "import",
                f"imports from `{module}`, which a {self.language} candidate may not use (allowed: "
                f"{allowed})",
            )
            return
        for a in node.names:
            if a.name == "*":
                self.add(
                    node,
                    "import",
                    f"uses `from {module} import *`; import the names it needs explicitly",
                )
                continue
            path = f"{module}.{a.name}"
            why = path_problem(path, self.language, self.draws)
            if why:
                self.add(node, "import", why)
            else:
                self.aliases[a.asname or a.name] = path

    # ---- names, calls and attributes ---------------------------------------------
    def _name(self, node: ast.Name, is_attr_base: bool) -> None:
        if node.id in FORBIDDEN_BUILTINS:
            if id(node) not in self.locals and id(node) not in self.getattr_ok:
                hint = (
                    '; `getattr(obj, "public_name")` with a constant name is allowed'
                    if node.id == "getattr"
                    else ""
                )
                self.add(
                    node,
                    "name",
                    f"uses `{node.id}`, which reaches code or harness state that candidates may "
                    f"not touch{hint}",
                )
        elif node.id.startswith("__") and node.id.endswith("__") and node.id not in ALLOWED_DUNDERS:
            self.add(
                node, "name", f"uses `{node.id}`, an interpreter internal candidates may not touch"
            )
        elif isinstance(node.ctx, ast.Load) and not is_attr_base:
            self._module_value(node)

    def _module_value(self, node: ast.AST) -> None:
        path = self._dotted(node)
        if path and (path in MODULE_PATHS or path in self.modules):
            self.add(
                node,
                "module",
                f"uses the module `{path}` as a value; import what it needs and access "
                f"its attributes directly (e.g. `import {path} as m`)",
            )

    def _getattr(self, node: ast.Call) -> None:
        """Allow `getattr(obj, "constant_public_name"[, default])`: it is `obj.name`, and
        paths through it are checked as such (an agent's `getattr(kernel, "n_regs", None)`
        was refused before)."""
        f = node.func
        if not (isinstance(f, ast.Name) and f.id == "getattr") or id(f) in self.locals:
            return
        name = _const_str(node.args[1]) if len(node.args) >= 2 else None
        if (
            node.keywords
            or not 2 <= len(node.args) <= 3
            or any(isinstance(a, ast.Starred) for a in node.args)
            or name is None
        ):
            return  # the name rule refuses `getattr` itself
        if not public_attribute(name):
            self.add(
                node,
                "attribute",
                f'uses getattr(…, "{name[:60]}"): only constant public attribute names are allowed',
            )
            return
        self.getattr_ok.add(id(f))

    def _call(self, node: ast.Call, is_attr_base: bool) -> None:
        f = node.func
        if (
            isinstance(f, ast.Name)
            and f.id == "type"
            and len(node.args) == 3
            and id(f) not in self.locals
        ):
            self.add(
                node,
                "class",
                "creates a class with type(name, bases, dict); write a class statement",
            )
        if id(f) in self.getattr_ok and not is_attr_base:
            self._path_check(node)
            self._module_value(node)

    def _attribute(self, node: ast.Attribute, is_attr_base: bool) -> None:
        attr = node.attr
        if attr.startswith("__") and attr.endswith("__"):
            if attr not in ALLOWED_DUNDERS:
                self.add(
                    node,
                    "attribute",
                    f"accesses `.{attr}`, an interpreter internal candidates may not touch",
                )
        elif attr in FRAME_ATTRS:
            self.add(
                node,
                "attribute",
                f"accesses `.{attr}`, which reads interpreter frames or code objects",
            )
        elif attr.startswith("_"):
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                self.add(
                    node,
                    "attribute",
                    f"accesses the private attribute `.{attr}`; use public APIs only",
                )
        elif attr in HIDDEN_WORK_ATTRS:
            self.add(
                node,
                "attribute",
                f"calls `.{attr}`, which moves work or memory outside what the gate can audit",
            )
        if not is_attr_base:  # the whole path once, not each of its prefixes
            self._path_check(node)
            if isinstance(node.ctx, ast.Load):
                self._module_value(node)

    def _dotted(self, node: ast.AST) -> str | None:
        return dotted_path(node, self.aliases, self.getattr_ok)

    def _path_check(self, node: ast.AST) -> None:
        path = self._dotted(node)
        if path and self._init_factory(node, path):
            return
        why = path_problem(path, self.language, self.draws) if path else None
        if why:
            self.add(node, "attribute", why)

    def _cpp(self, tree: ast.Module) -> None:
        """C++ and CUDA C++ sources in the module's strings (static_cpp.py's rules)."""
        for line, message in cpp_module_findings(tree, self.draws):
            self.findings.setdefault((line, message), Finding(line, "cpp", message))

    def _target(self, node: ast.AST) -> None:
        if isinstance(node, ast.Tuple | ast.List):
            for elt in node.elts:
                self._target(elt)
            return
        if isinstance(node, ast.Starred):
            self._target(node.value)
            return
        if isinstance(node, ast.Attribute | ast.Subscript):
            base = node.value
            while isinstance(base, ast.Attribute | ast.Subscript):
                base = base.value
            if isinstance(base, ast.Name) and base.id in self.aliases:
                what = (
                    self._dotted(node) if isinstance(node, ast.Attribute) else self.aliases[base.id]
                )
                self.add(
                    node,
                    "assignment",
                    f"assigns to `{what}`; candidates may not patch imported modules or their "
                    "objects",
                )
