"""What an expression in a page's code can evaluate to, read from its syntax tree: the text of a string
literal or an f-string (:func:`string_value`), and what the names of a page stand for where the code
writes it out (:class:`Program`), so that a string is followed from where it is written to where it is
shown (``course-pattern`` entries of the runtime catalogues, see :mod:`autograder.course.i18n.runtime_text`)."""

from __future__ import annotations

import functools

# Calls that copy what they are given (a list of its items).
COPIES = ("list", "tuple", "sorted", "reversed")


def string_value(node: "ast.AST") -> tuple[str, bool] | None:
    """A string literal as (text, False), an f-string as (pattern with {placeholders}, True). A literal
    formatted inside an f-string is the text it makes (a table's header, ``f"{'contexts seen':>14}"``, is
    ``" contexts seen"``), so a header row is one text, and a translation can keep its columns."""
    import ast

    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value, False
    if isinstance(node, ast.JoinedStr):
        literals = [formatted_literal(value) for value in node.values]
        if None not in literals:
            return "".join(literals), False
        parts = []
        for value, literal in zip(node.values, literals):
            if literal is not None:
                parts.append(literal.replace("{", "{{").replace("}", "}}"))
            else:
                spec = ""
                if value.format_spec is not None:
                    spec = ":" + "".join(str(v.value) for v in value.format_spec.values if isinstance(v, ast.Constant))
                conversion = "!" + chr(value.conversion) if value.conversion != -1 else ""
                parts.append("{" + ast.unparse(value.value) + conversion + spec + "}")
        return "".join(parts), True
    return None


def formatted_literal(value: "ast.AST") -> str | None:
    """What a piece of an f-string writes when it is fixed text: a literal, or a literal formatted with a
    literal spec and conversion (``{'n':>2}`` -> ``" n"``); None for a value only the running code knows."""
    import ast

    if isinstance(value, ast.Constant):
        return str(value.value)
    spec = value.format_spec.values if value.format_spec is not None else []
    if not (isinstance(value.value, ast.Constant) and all(isinstance(v, ast.Constant) for v in spec)):
        return None
    converted = {ord("s"): str, ord("r"): repr, ord("a"): ascii}.get(value.conversion, lambda v: v)
    try:
        return format(converted(value.value.value), "".join(v.value for v in spec))
    except (TypeError, ValueError):
        return None


def _remembered(resolve):
    """``resolve(self, node, seen)`` answered once per program for each node and set of names already
    followed: the resolvers call one another along every path through the page's bindings, and the same
    question comes back many times (reading the course's code took four times as long without this). The node is kept
    with its answer, so that its ``id`` is not reused while the program lives (a name is its own key);
    callers get a copy."""

    @functools.wraps(resolve)
    def remembered(self, node, seen=frozenset()):
        key = (resolve.__name__, node if isinstance(node, str) else id(node), frozenset(seen))
        if key not in self.answers:
            self.answers[key] = (node, resolve(self, node, seen))
        return list(self.answers[key][1])

    return remembered


class Program:
    """The code cells of one page read together, enough to follow a string through names to where it is
    shown: what each name is bound to (assignments, ``+=``, ``append``, ``insert`` and ``extend``, ``for``
    targets over literal lists, dicts, ``.items()``, ``zip`` and ``enumerate``, an entry stored in a dict
    (``mistakes[hint] = wrong``), the values a function returns, a function's parameters at its calls, the
    ``*parts`` a decorator is given among them). So figure text kept in a variable is found where it is drawn
    (``for label in ["plain", "residual"]: ax.plot(..., label=label)``)."""

    def __init__(self, trees: list["ast.AST"]):
        import ast

        self.bound: dict[str, list[ast.AST]] = {}
        self.added: dict[str, list[ast.AST]] = {}                   # list.append(item), insert(i, item): the items
        self.extended: dict[str, list[ast.AST]] = {}                # list.extend(items), +=: iterables
        self.loops: dict[str, list[tuple[ast.AST, ast.AST]]] = {}   # name -> (target, iterable) binding it
        self.returns: dict[str, list[ast.AST]] = {}
        self.parameters: dict[str, list[tuple[str, int, bool]]] = {}   # parameter -> (function, position, *args)
        self.calls: dict[str, list[ast.Call]] = {}
        self.answers: dict[tuple, tuple] = {}                         # see _remembered
        for tree in trees:
            for node in ast.walk(tree):
                if isinstance(node, ast.Assign):
                    for target in node.targets:
                        self._bind(target, node.value)
                elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                    self._bind(node.target, node.value)
                elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                    self.extended.setdefault(node.target.id, []).append(node.value)
                elif isinstance(node, (ast.For, ast.comprehension)):
                    for name in {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}:
                        self.loops.setdefault(name, []).append((node.target, node.iter))
                elif isinstance(node, (ast.FunctionDef, ast.Lambda)):
                    self._function(node)
                elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                    self.calls.setdefault(node.func.id, []).append(node)
                elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args
                      and isinstance(node.func.value, ast.Name) and node.func.attr in ("append", "extend", "insert")):
                    into = self.extended if node.func.attr == "extend" else self.added
                    into.setdefault(node.func.value.id, []).append(node.args[-1])   # insert(i, item): the item

    def _function(self, node: "ast.AST") -> None:
        import ast

        name = getattr(node, "name", "")
        arguments = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
        for position, argument in enumerate(arguments):
            self.parameters.setdefault(argument.arg, []).append((name, position, False))
        if node.args.vararg is not None:
            position = len(node.args.posonlyargs + node.args.args)
            self.parameters.setdefault(node.args.vararg.arg, []).append((name, position, True))
        defaults = node.args.defaults + [d for d in node.args.kw_defaults if d is not None]
        for argument, default in zip(arguments[len(arguments) - len(defaults):], defaults):
            self.bound.setdefault(argument.arg, []).append(default)
        if isinstance(node, ast.Lambda):
            return
        self.returns.setdefault(name, []).extend(
            n.value for n in ast.walk(node) if isinstance(n, ast.Return) and n.value is not None)

    def _bind(self, target: "ast.AST", value: "ast.AST") -> None:
        import ast

        if isinstance(target, ast.Name):
            self.bound.setdefault(target.id, []).append(value)
        elif (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)   # table[hint] = wrong
              and isinstance(target.slice, (ast.Name, ast.Constant, ast.JoinedStr, ast.BinOp))
              and not isinstance(getattr(target.slice, "value", ""), int)):
            self.bound.setdefault(target.value.id, []).append(ast.Dict(keys=[target.slice], values=[value]))
        elif isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)):
            for part, item in zip(target.elts, value.elts):
                self._bind(part, item)

    @staticmethod
    def _unpacked(target: "ast.AST", item: "ast.AST", name: str) -> list["ast.AST"]:
        """What ``name`` in ``target`` is bound to when ``target`` takes the value ``item``."""
        import ast

        if isinstance(target, ast.Name):
            return [item] if target.id == name else []
        if isinstance(target, (ast.Tuple, ast.List)) and isinstance(item, (ast.Tuple, ast.List)):
            return [v for part, element in zip(target.elts, item.elts) for v in Program._unpacked(part, element, name)]
        return []

    @_remembered
    def _items(self, node: "ast.AST", seen: set[str]) -> list["ast.AST"]:
        """What iterating over ``node`` yields, where the code writes it out (else nothing)."""
        import ast

        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return list(node.elts)
        if isinstance(node, ast.Dict):
            return [k for k in node.keys if k is not None]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self._items(node.left, seen) + self._items(node.right, seen)
        if isinstance(node, (ast.IfExp, ast.BoolOp)):           # a choice of them (``table if p < 1 else []``)
            return [item for choice in choices(node) for item in self._items(choice, seen)]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("items", "keys"):
            pairs = [(k, v) for d in self._dicts(node.func.value, seen) for k, v in zip(d.keys, d.values) if k is not None]
            return [ast.Tuple(elts=[k, v]) if node.func.attr == "items" else k for k, v in pairs]
        function = getattr(node.func, "id", "") if isinstance(node, ast.Call) else ""
        if function in ("enumerate", "zip") and node.args:
            columns = [self._items(a, seen) for a in node.args]
            if function == "enumerate":
                return [ast.Tuple(elts=[ast.Constant(0), item]) for item in columns[0]]
            rows = max(map(len, columns))                     # a column the code does not write out: unknown
            columns = [c if c else [ast.Constant(None)] * rows for c in columns]
            return [ast.Tuple(elts=list(row)) for row in zip(*columns)]
        if function in COPIES and node.args:
            return self._items(node.args[0], seen)
        if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            return [node.elt]
        key = getattr(node, "id", getattr(getattr(node, "func", None), "id", ""))     # a name, or a function called
        return [item for value in self._values(node, seen) for item in self._items(value, seen | {key})]

    @_remembered
    def _values(self, node: "ast.AST", seen: set[str]) -> list["ast.AST"]:
        """The expressions a name or a call of the page's own function may stand for (else none)."""
        import ast

        if isinstance(node, ast.Name) and node.id not in seen:
            return self._bindings(node.id, seen | {node.id}) + [
                ast.List(elts=self.added.get(node.id, []))] + self.extended.get(node.id, [])
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id not in seen:
            return self.returns.get(node.func.id, [])
        return []

    @_remembered
    def _dicts(self, node: "ast.AST", seen: set[str]) -> list["ast.Dict"]:
        """The dict literals ``node`` (a dict, a name bound to one, a call returning one) may be."""
        import ast

        if isinstance(node, ast.Dict):
            return [node]
        if isinstance(node, ast.DictComp):
            return [ast.Dict(keys=[node.key], values=[node.value])]
        key = getattr(node, "id", getattr(getattr(node, "func", None), "id", ""))
        return [d for value in self._values(node, seen) for d in self._dicts(value, seen | {key})]

    @_remembered
    def _bindings(self, name: str, seen: set[str]) -> list["ast.AST"]:
        """The expressions ``name`` may stand for: its bindings, the items of the loops that bind it,
        and the arguments passed for it where it is a function's parameter (all the rest for ``*args``)."""
        import ast

        found = list(self.bound.get(name, []))
        for target, iterable in self.loops.get(name, []):
            found += [v for item in self._items(iterable, seen) for v in self._unpacked(target, item, name)]
        for function, position, starred in self.parameters.get(name, []):
            for call in self.calls.get(function, []):
                found += [k.value for k in call.keywords if k.arg == name]
                if starred:                                     # def _after(*parts): the tuple of the rest
                    found.append(ast.Tuple(elts=call.args[position:]))
                elif position < len(call.args) and not isinstance(call.args[position], ast.Starred):
                    found.append(call.args[position])
        return found

    @_remembered
    def strings(self, node: "ast.AST", seen: frozenset[str] = frozenset()) -> list[tuple[str, bool]]:
        """The strings an expression can evaluate to: literals, f-strings (and the strings of the names
        they format), both sides of ``+``, of ``a if c else b`` and of ``a or b`` (``_which(out, table) or
        "the default hint"``), the items of lists, tuples and dicts (keys and values), the items a ``join``
        joins, a dict's values and default where it is looked up (``hints.get(got, "count each nn.Linear")``,
        ``hints[got]``), the items and default of ``next(...)``, whatever a name is bound to and what the
        page's own function returns."""
        import ast

        found = string_value(node)
        if found:
            formatted = [v.value for v in getattr(node, "values", []) if isinstance(v, ast.FormattedValue)
                         and formatted_literal(v) is None]
            return [found] + [s for value in formatted for s in self.strings(value, seen)]
        children = []
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "_with_hint" and node.args:
            children = [node.args[0]]
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") == "next" and node.args:
            children = self._items(node.args[0], set(seen)) + node.args[1:]
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "join" and node.args:
            children = self._items(node.args[0], set(seen))       # " Or: ".join(hints): each hint alone
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "get" and node.args:
            children = [v for d in self._dicts(node.func.value, set(seen)) for v in d.values] + node.args[1:]
        elif (isinstance(node, ast.Subscript) and getattr(node.value, "id", None) not in seen | {None}
              and not (isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int))):
            children = [v for d in self._dicts(node.value, set(seen)) for v in d.values]    # hints[got], not key[0]
            seen = seen | {node.value.id}
        elif isinstance(node, ast.Call) and getattr(node.func, "id", "") in COPIES and node.args:
            children = self._items(node.args[0], set(seen))
        elif (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
              and isinstance(node.slice.value, int)):               # key[1] of a tuple the code writes out
            children = [v.elts[node.slice.value] for v in self._values(node.value, set(seen))
                        if isinstance(v, ast.Tuple) and -len(v.elts) <= node.slice.value < len(v.elts)]
        elif isinstance(node, (ast.Name, ast.Call)):
            key = node.id if isinstance(node, ast.Name) else getattr(node.func, "id", None)
            if key is None or key in seen:
                return []
            children, seen = self._values(node, set(seen)), seen | {key}
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            children = [node.left, node.right]
        elif isinstance(node, (ast.IfExp, ast.BoolOp)):
            children = choices(node)
        elif isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            children = node.elts
        elif isinstance(node, ast.Dict):
            children = [k for k in node.keys if k is not None] + node.values
        elif isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            children = [node.elt]
        return [s for child in children for s in self.strings(child, seen)]


def choices(node: "ast.AST") -> list["ast.AST"]:
    """The values a choice can take: both branches of ``a if c else b``, each operand of ``a or b``."""
    import ast

    return [node.body, node.orelse] if isinstance(node, ast.IfExp) else list(node.values)
