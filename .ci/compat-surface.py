#!/usr/bin/env python3
"""Writes the compatibility suite's surface programs
(tests/compat/programs/surface_*.rs) from the official `mongodb` crate's
rustdoc JSON, so that no item of its sync API is picked by hand.

    python3 .ci/compat-surface.py MONGODB_JSON

MONGODB_JSON is `cargo +nightly rustdoc -p mongodb -- -Z unstable-options
--output-format json` of the official crate with the `sync` feature (what
`.ci/compat-surface` runs in the scratch crate of `.ci/compat-official`).

Every public item reachable from `mongodb::` is named:
- each path (module, type, trait, function, constant) by a `use .. as _`;
- each inherent method of a type and each method of a public trait by a
  call with arguments of its parameter types, the result bound to its
  return type (a method-call, so receivers autoref as in user code);
- each public field by a typed borrow, each enum variant (and its fields)
  by a pattern;
- each trait a public type implements by a bound check;
- each options type's `builder()` by one call per setter and a chain of
  all of them ending in `build()`.
Generic parameters are instantiated with concrete types chosen from their
bounds (`Document` for a document type, `X` for `impl Into<X>`, a function
pointer for a closure), so the programs compile against both crates. An
action builder is reached by the handle method that returns it
(`coll.find(..)`), the call bound to the official return type with its
generic parameters (`Update<'_>`, `Find<'_, Document>`: programs name them
in signatures), as is each call turning one into another (`.session(..)`);
its setters are checked by chained calls. A trait impl
generic over its input (`impl<E> From<E> for Error`) is counted, not checked
here: the hand-written `conversions` program names its instances.

What this crate lacks is listed, with a reason, in
`.ci/compat-surface-differences`; the checks it matches are left out and
counted, so the programs compile here and the list is the whole gap.

Left out, as async-only (the README's difference list): the async handle
types at the root and in `change_stream`/`gridfs` (their sync twins are in
`mongodb::sync`), `async fn`s, futures and streams (`IntoFuture`, `Stream`,
`BoxFuture`), and what needs a feature the sync build does not enable.
"""

import json
import re
import subprocess
import sys
from collections import defaultdict

# Async-only: the async handles (a sync program names `mongodb::sync::..`)
# and the runtime glue.
ASYNC_ONLY_PATHS = {
    "mongodb::Client",
    "mongodb::Database",
    "mongodb::Collection",
    "mongodb::ClientSession",
    "mongodb::Cursor",
    "mongodb::SessionCursor",
    "mongodb::SessionCursorStream",
    "mongodb::BoxFuture",
    "mongodb::change_stream::ChangeStream",
    "mongodb::change_stream::session::SessionChangeStream",
    "mongodb::change_stream::SessionChangeStream",
    "mongodb::change_stream::session",
    "mongodb::gridfs::GridFsBucket",
    "mongodb::gridfs::GridFsUploadStream",
    "mongodb::gridfs::GridFsDownloadStream",
    "mongodb::action::Action",
    "mongodb::raw_batch_cursor",
}
ASYNC_ONLY_TRAITS = {"IntoFuture", "Future", "Stream", "FusedStream", "AsyncRead", "AsyncWrite"}

DOC = "mongodb::bson::Document"
# std items whose defining module is private, by name.
STD = {
    "FromStr": "std::str::FromStr",
    "Iterator": "std::iter::Iterator",
    "IntoIterator": "std::iter::IntoIterator",
    "HashMap": "std::collections::HashMap",
    "HashSet": "std::collections::HashSet",
    "Fn": "std::ops::Fn",
    "FnMut": "std::ops::FnMut",
    "FnOnce": "std::ops::FnOnce",
    "SocketAddr": "std::net::SocketAddr",
    "Drop": "std::ops::Drop",
}
# bson items re-exported at its root (their defining modules are private).
BSON_ROOT = {
    "Bson", "Document", "Timestamp", "DateTime", "Binary", "Regex", "JavaScriptCodeWithScope",
    "RawDocument", "RawDocumentBuf", "RawBson", "RawBsonRef", "RawArray", "RawArrayBuf",
    "Decimal128", "Uuid", "DbPointer", "Array",
}
# Traits a bound cannot usefully name: derive internals, `Drop`.
UNCHECKED_TRAITS = {"StructuralPartialEq", "Drop", "Freeze", "UnsafeUnpin"}
SYNC_TWINS = {"Client", "Database", "Collection", "ClientSession", "Cursor", "SessionCursor"}


class Surface:
    def __init__(self, data):
        self.data = data
        self.index = data["index"]
        self.paths = data["paths"]
        self.crate_id = self.index[str(data["root"])]["crate_id"]
        # id -> public path (the first found walking from the root)
        self.public = {}
        self.twinned = False
        self.all_paths = set()
        self.modules = []
        self.walk(str(data["root"]), "mongodb")

    def item(self, id_):
        return self.index.get(str(id_))

    def walk(self, module_id, prefix):
        module = self.item(module_id)
        self.modules.append(prefix)
        for child in module["inner"]["module"]["items"]:
            item = self.item(child)
            if item is None or item.get("visibility") != "public":
                continue
            inner = item["inner"]
            kind = next(iter(inner))
            if kind == "use":
                use = inner["use"]
                target = use.get("id")
                target_item = self.item(target) if target is not None else None
                if use["is_glob"]:
                    if target_item and "module" in target_item["inner"]:
                        self.walk(str(target), prefix)
                    continue
                path = f"{prefix}::{use['name']}"
                if target_item is None:
                    # An external item (bson, std): named by its path only.
                    self.all_paths.add(path)
                    continue
                self.add(str(target), path, target_item)
            else:
                self.add(str(child), f"{prefix}::{item['name']}", item)

    def add(self, id_, path, item):
        if path in ASYNC_ONLY_PATHS:
            return
        self.all_paths.add(path)
        kind = next(iter(item["inner"]))
        known = self.public.get(id_)
        if kind == "module":
            if known is None:
                self.public[id_] = path
                self.walk(id_, path)
        elif known is None or path.count("::") < known.count("::"):
            # The shortest public path names the item in the checks.
            self.public[id_] = path

    # ---- types -------------------------------------------------------

    def path_of(self, id_, fallback):
        if str(id_) in self.public:
            return self.public[str(id_)]
        summary = self.paths.get(str(id_))
        if summary is None:
            return None
        parts = summary["path"]
        if summary["crate_id"] == self.crate_id:
            # An async handle (`impl Into<&mut ClientSession>` takes the
            # sync one too): its sync twin; else no public path.
            if parts[-1] in SYNC_TWINS:
                self.twinned = True
                return f"mongodb::sync::{parts[-1]}"
            if parts[-1] == "BoxFuture" or "raw_batch_cursor" in parts:
                raise Unrenderable("async-only " + "::".join(parts))
            return None
        crate = parts[0]
        if crate in ("bson", "bson2", "bson3"):
            if parts[-1] in BSON_ROOT:
                return f"mongodb::bson::{parts[-1]}"
            # `bson::de::error::Error` is re-exported as `bson::de::Error`.
            return "mongodb::bson::" + "::".join(p for p in parts[1:] if p != "error")
        if crate in ("tokio", "futures_core", "futures_util", "futures_io"):
            raise Unrenderable("async-only " + "::".join(parts))
        if crate in ("serde", "serde_core"):
            return "serde::" + parts[-1]
        if crate in ("core", "alloc", "std"):
            std_path = STD.get(parts[-1], "::".join(["std"] + parts[1:]))
            return std_path.replace("std::io::error::", "std::io::")
        return "::".join(parts)


class Unrenderable(Exception):
    pass


class Renderer:
    """Renders rustdoc types as Rust source with generics substituted."""

    def __init__(self, surface, subst, hr=False):
        self.s = surface
        self.subst = subst  # generic name -> rendered type
        # In a trait bound: every lifetime is the bound's `for<'l>`.
        self.hr = hr

    def path(self, p):
        name = self.s.path_of(p["id"], p.get("path") or p.get("name"))
        if name is None:
            raise Unrenderable(p.get("path"))
        if name.split("::")[-1] in ASYNC_ONLY_TRAITS or name in ASYNC_ONLY_PATHS:
            raise Unrenderable(name)
        return name + self.args(p.get("args"))

    def args(self, args):
        if not args:
            return ""
        if "angle_bracketed" in args:
            ab = args["angle_bracketed"]
            parts = []
            for a in ab["args"]:
                if "type" in a:
                    parts.append(self.ty(a["type"]))
                elif "lifetime" in a:
                    parts.append(self.lifetime(a["lifetime"]))
                elif "const" in a:
                    parts.append(a["const"]["expr"])
                else:
                    raise Unrenderable(str(a))
            for c in ab.get("constraints", []):
                binding = c["binding"]
                if "equality" in binding:
                    parts.append(f"{c['name']} = {self.ty(binding['equality']['type'])}")
                else:
                    raise Unrenderable("constraint")
            return "<" + ", ".join(parts) + ">" if parts else ""
        if "parenthesized" in args:
            pa = args["parenthesized"]
            inputs = ", ".join(self.ty(t) for t in pa["inputs"])
            out = f" -> {self.ty(pa['output'])}" if pa.get("output") else ""
            return f"({inputs}){out}"
        raise Unrenderable("args")

    def lifetime(self, lt):
        if lt == "'static":
            return "'static"
        return "'l" if self.hr else "'_"

    def ty(self, t):
        if isinstance(t, str):
            if t == "infer":
                return "_"
            raise Unrenderable(t)
        kind, v = next(iter(t.items()))
        if kind == "resolved_path":
            return self.path(v)
        if kind == "generic":
            if v in self.subst:
                return self.subst[v]
            if v == "Self" and "Self" in self.subst:
                return self.subst["Self"]
            raise Unrenderable("generic " + v)
        if kind == "primitive":
            return v
        if kind == "tuple":
            inner = ", ".join(self.ty(x) for x in v)
            return f"({inner},)" if len(v) == 1 else f"({inner})"
        if kind == "slice":
            return f"[{self.ty(v)}]"
        if kind == "array":
            return f"[{self.ty(v['type'])}; {v['len']}]"
        if kind == "borrowed_ref":
            lt = v.get("lifetime")
            lt = "'static " if lt == "'static" else ("'l " if self.hr else "")
            mut = "mut " if v["is_mutable"] else ""
            return f"&{lt}{mut}{self.ty(v['type'])}"
        if kind == "impl_trait":
            return self.concrete(v)
        if kind == "dyn_trait":
            traits = " + ".join(self.poly_trait(pt) for pt in v["traits"])
            lt = v.get("lifetime")
            if lt:
                traits += " + " + self.lifetime(lt)
            return f"dyn {traits}"
        if kind == "function_pointer":
            return self.fn_pointer(v)
        raise Unrenderable(kind)

    def poly_trait(self, pt):
        hrtb = self.hrtb(pt.get("generic_params", []))
        return hrtb + self.path(pt["trait"])

    def hrtb(self, params):
        lts = [p["name"] for p in params if "lifetime" in p["kind"]]
        return f"for<{', '.join(lts)}> " if lts else ""

    def fn_pointer(self, v):
        sig = v["sig"]
        inputs = ", ".join(self.ty(t) for _, t in sig["inputs"])
        out = f" -> {self.ty(sig['output'])}" if sig.get("output") else ""
        return f"{self.hrtb(v.get('generic_params', []))}fn({inputs}){out}"

    # A concrete type satisfying `bounds` (those of an `impl Trait` or a
    # generic parameter).
    def concrete(self, bounds):
        traits = []
        for b in bounds:
            if "trait_bound" in b:
                traits.append(b["trait_bound"])
        for tb in traits:
            p = tb["trait"]
            name = (self.s.path_of(p["id"], p["path"]) or p["path"]).split("::")[-1]
            args = p.get("args") or {}
            ab = args.get("angle_bracketed", {})
            targs = [a["type"] for a in ab.get("args", []) if "type" in a]
            if name in ("Fn", "FnMut", "FnOnce"):
                pa = args["parenthesized"]
                inputs = ", ".join(self.ty(t) for t in pa["inputs"])
                out = f" -> {self.ty(pa['output'])}" if pa.get("output") else ""
                return f"{self.hrtb(tb.get('generic_params', []))}fn({inputs}){out}"
            if name in ("Into", "Borrow") and targs:
                target = targs[0]
                # `impl Into<Option<X>>`: users pass an `X`.
                if "resolved_path" in target and target["resolved_path"].get("path", "").split("::")[-1] == "Option":
                    inner = target["resolved_path"]["args"]["angle_bracketed"]["args"][0]["type"]
                    return self.ty(inner)
                return self.ty(target)
            if name in ("TryInto", "TryFrom") and targs:
                try:
                    return self.ty(targs[0])
                except Unrenderable:
                    return "String"  # a connection string
            if name == "AsRef" and targs:
                target = self.ty(targs[0])
                return {"str": "String", "[u8]": "Vec<u8>", "std::path::Path": "std::path::PathBuf"}.get(target, target)
            if name == "IntoIterator":
                item = [c for c in ab.get("constraints", []) if c["name"] == "Item"]
                if item:
                    return f"Vec<{self.ty(item[0]['binding']['equality']['type'])}>"
            if name == "Error":
                return "std::io::Error"
            if name in ("ToString", "Display"):
                return "String"
            implementor = self.implementor(p["id"])
            if implementor:
                return implementor
        return DOC

    def implementor(self, trait_id):
        """A type implementing the crate's own trait `trait_id`."""
        trait = self.s.item(trait_id)
        if trait is None or "trait" not in trait["inner"]:
            return None
        for impl_id in trait["inner"]["trait"].get("implementations", []):
            impl_ = self.s.item(impl_id)["inner"]["impl"]
            if impl_["generics"]["params"]:
                continue
            try:
                return Renderer(self.s, {}).ty(impl_["for"])
            except Unrenderable:
                continue
        return None


def generic_params(generics):
    """(name, bounds) of each type parameter, where-clause bounds merged."""
    params = {}
    order = []
    for p in generics.get("params", []):
        k = p["kind"]
        if "type" in k:
            params[p["name"]] = list(k["type"].get("bounds", []))
            order.append(p["name"])
    for wp in generics.get("where_predicates", []):
        if "bound_predicate" in wp:
            bp = wp["bound_predicate"]
            t = bp["type"]
            if isinstance(t, dict) and "generic" in t and t["generic"] in params:
                params[t["generic"]].extend(bp["bounds"])
    return [(n, params[n]) for n in order]


def implied_params(generics):
    """Names of the type parameters that an associated-type binding in
    another parameter's bound equates (`E` in `C: TryInto<X, Error = E>`)."""
    bounds = [b for _, bs in generic_params(generics) for b in bs]
    implied = set()
    for bound in bounds:
        args = (bound.get("trait_bound", {}).get("trait", {}).get("args") or {})
        for constraint in args.get("angle_bracketed", {}).get("constraints", []):
            equality = (constraint.get("binding") or {}).get("equality") or {}
            t = equality.get("type")
            if isinstance(t, dict) and "generic" in t:
                implied.add(t["generic"])
    return implied


def substitute(surface, generics, base):
    """Concrete types for the type parameters of `generics`, on top of
    `base`; a parameter named like a session state gets the implicit one."""
    subst = dict(base)
    for name, bounds in generic_params(generics):
        if name in subst:
            continue
        if name in ("Session", "S"):
            subst[name] = "mongodb::action::ImplicitSession"
            continue
        # Bounds may name other parameters: substitute what we know first.
        try:
            subst[name] = Renderer(surface, subst).concrete(bounds)
        except Unrenderable as e:
            if "async-only" in str(e):
                raise
            subst[name] = DOC
    return subst


class Program:
    def __init__(self, name, doc):
        self.name = name
        self.doc = doc
        self.uses = []
        self.checks = []
        self.count = defaultdict(int)

    def check(self, kind, label, body):
        reason = DIFFERENCES.excluded(label, body)
        if reason is not None:
            self.count["listed as different"] += 1
            DIFFERENCES.hits[reason] += 1
            return
        self.count[kind] += 1
        n = len(self.checks)
        self.checks.append(f"// {label}\nfn check_{n}() {{\n{body}\n}}\n")

    def source(self):
        counts = ", ".join(f"{v} {k}" for k, v in sorted(self.count.items()))
        head = (
            f"//! Generated by `.ci/compat-surface.py` from the official crate's rustdoc\n"
            f"//! JSON; do not edit. {self.doc}\n"
            f"//! Compile-only: nothing here runs ({counts}).\n"
            "#![allow(dead_code, unused, deprecated, clippy::all)]\n\n"
            "fn any<T>() -> T {\n    unreachable!()\n}\n\n"
            "pub fn run(_uri: &str) -> mongodb::error::Result<()> {\n    Ok(())\n}\n\n"
        )
        return head + "".join(self.uses) + "\n" + "\n".join(self.checks)


def self_type(surface, id_, path, generics, subst):
    args = []
    for p in generics.get("params", []):
        k = p["kind"]
        if "lifetime" in k:
            args.append("'static")
        elif "type" in k:
            args.append(subst[p["name"]])
        elif "const" in k:
            raise Unrenderable("const generic")
    return path + (f"<{', '.join(args)}>" if args else "")


def position_types(surface, impl_ids):
    """For each type-argument position, a concrete type some impl of the
    type uses there (`BulkWrite<'a, SummaryBulkWriteResult>`): the stand-in
    for a parameter bounded by a private trait."""
    found = {}
    for impl_id in impl_ids:
        impl_item = surface.item(impl_id)
        if impl_item is None:
            continue
        for_ = impl_item["inner"]["impl"]["for"]
        if not (isinstance(for_, dict) and "resolved_path" in for_):
            continue
        args = ((for_["resolved_path"].get("args") or {}).get("angle_bracketed") or {}).get("args", [])
        for i, arg in enumerate(args):
            if "type" in arg and "generic" not in json.dumps(arg["type"]) and i not in found:
                try:
                    found[i] = Renderer(surface, {}).ty(arg["type"])
                except Unrenderable:
                    pass
    return found


def impl_self(surface, impl_, base, positions=None):
    """The rendered `for` type of an impl, with the impl's generics
    instantiated; None if it is not a public type. A parameter in the
    position of one with a default in the type's definition takes the
    default (`Session = ImplicitSession`, `R = SummaryBulkWriteResult`)."""
    base = dict(base)
    for_ = impl_["for"]
    if isinstance(for_, dict) and "resolved_path" in for_:
        definition = surface.item(for_["resolved_path"]["id"])
        args = ((for_["resolved_path"].get("args") or {}).get("angle_bracketed") or {}).get("args", [])
        if definition is not None:
            params = definition["inner"][kind_of(definition)].get("generics", {}).get("params", [])
            for i, (param, arg) in enumerate(zip(params, args)):
                if not ("type" in arg and "generic" in arg["type"]):
                    continue
                default = param["kind"].get("type", {}).get("default")
                if default:
                    try:
                        base[arg["type"]["generic"]] = Renderer(surface, base).ty(default)
                        continue
                    except Unrenderable:
                        pass
                name = arg["type"]["generic"]
                bounds = dict(generic_params(impl_["generics"])).get(name, [])
                private_bound = any(
                    "trait_bound" in b and surface.path_of(b["trait_bound"]["trait"]["id"], None) is None
                    for b in bounds
                )
                if private_bound and positions and i in positions:
                    base[name] = positions[i]
    subst = substitute(surface, impl_["generics"], base)
    r = Renderer(surface, subst)
    # Lifetimes of the impl are 'static in the rendered self type.
    return r.ty(impl_["for"]).replace("'_", "'static"), subst


def method_check(surface, fn_item, self_rendered, subst, receiver=None):
    """A call of the method; `receiver` is an expression of the self type
    when the type is not to be named (an action builder, reached through
    the handle method that returns it)."""
    f = fn_item["inner"]["function"]
    if f["header"].get("is_async"):
        raise Unrenderable("async-only async fn")
    subst = substitute(surface, f["generics"], dict(subst, Self=self_rendered))
    r = Renderer(surface, subst)
    inputs = f["sig"]["inputs"]
    args = []
    recv = None
    for i, (pname, t) in enumerate(inputs):
        if i == 0 and pname == "self":
            if isinstance(t, dict) and "borrowed_ref" in t:
                mut = "mut " if t["borrowed_ref"]["is_mutable"] else ""
                recv = f"(&{mut}{receiver})" if receiver else f"any::<&{mut}{self_rendered}>()"
            else:
                recv = receiver or f"any::<{self_rendered}>()"
            continue
        args.append(f"any::<{r.ty(t)}>()")
    out = f["sig"].get("output")
    ann = ""
    if out is not None:
        try:
            rendered = r.ty(out)
            # A call that makes a builder (`coll.update_one(..)`) or turns
            # one into another (`.session(..)` to `ExplicitSession`) is
            # bound to the official return type: a program names
            # `Update<'_>` in a signature, so the builder's generic
            # parameters are API. A setter's `Self` is left unnamed: it
            # would pin the checks' stand-in `'static` lifetimes.
            returns_self = out == {"generic": "Self"}
            if "impl " not in rendered and (
                "mongodb::action::" not in rendered or receiver is None or not returns_self
            ):
                ann = f": {rendered}"
        except Unrenderable:
            ann = ""
    name = fn_item["name"]
    if not ann:
        # Nothing to infer a method's own type parameters from: name them.
        # A parameter another one's bound fixes (`C: TryInto<X, Error =
        # E>`) is left to inference: the chosen `C` decides it, and naming
        # it apart from `C` could name a type no `C` converts with.
        implied = implied_params(f["generics"])
        explicit = [
            "_" if p["name"] in implied else subst[p["name"]]
            for p in f["generics"].get("params", [])
            if "type" in p["kind"] and not p["kind"]["type"].get("is_synthetic")
        ]
        if explicit:
            name += f"::<{', '.join(explicit)}>"
    call = f"{recv}.{name}({', '.join(args)})" if recv else f"<{self_rendered}>::{name}({', '.join(args)})"
    return f"    let _{ann} = {call};"


def builder_constructors(surface):
    """For each action builder, a call of a sync handle method returning it."""
    found = {}
    for id_, path in sorted(surface.public.items(), key=lambda kv: kv[1]):
        if not path.startswith("mongodb::sync::"):
            continue
        item = surface.item(id_)
        if kind_of(item) != "struct":
            continue
        inner = item["inner"]["struct"]
        for impl_id in inner.get("impls", []):
            impl_ = surface.item(impl_id)["inner"]["impl"]
            if impl_.get("trait") is not None or impl_.get("blanket_impl") is not None:
                continue
            try:
                impl_rendered, isubst = impl_self(surface, impl_, {})
            except Unrenderable:
                continue
            for mid in impl_["items"]:
                m = surface.item(mid)
                if m is None or kind_of(m) != "function":
                    continue
                out = m["inner"]["function"]["sig"].get("output")
                if not (isinstance(out, dict) and "resolved_path" in out):
                    continue
                target = str(out["resolved_path"]["id"])
                if not surface.public.get(target, "").startswith("mongodb::action::") or target in found:
                    continue
                try:
                    body = method_check(surface, m, impl_rendered, isubst)
                except Unrenderable:
                    continue
                found[target] = body.split(" = ", 1)[1].rstrip(";")
    return found


def receiver_for(surface, impl_, constructor):
    """The constructor call adjusted to the impl's session state, or None
    when the impl is for another instance (then the type is named)."""
    if constructor is None:
        return None
    for_ = impl_["for"]
    args = ((for_.get("resolved_path", {}).get("args") or {}).get("angle_bracketed") or {}).get("args", [])
    session = False
    for arg in args:
        if "type" not in arg:
            continue
        t = arg["type"]
        if "generic" in t:
            continue
        if "resolved_path" in t and t["resolved_path"]["path"].split("::")[-1] == "ImplicitSession":
            continue
        if "borrowed_ref" in t:
            continue  # `StartTransaction<&mut ClientSession>`: what the constructor gives
        if "resolved_path" in t and t["resolved_path"]["path"].split("::")[-1] == "ExplicitSession":
            session = True
            continue
        return None
    if session:
        return f"{constructor}.session(any::<&mut mongodb::sync::ClientSession>())"
    return constructor


def group_of(path):
    if path.startswith("mongodb::sync"):
        return "handles"
    if path.startswith("mongodb::action"):
        return "actions"
    if path.startswith("mongodb::options"):
        return "options"
    return "types"


GROUP_DOCS = {
    "handles": "The sync handles (`mongodb::sync`): every method and trait.",
    "actions": "The action builders (`mongodb::action`): every setter and `run`.",
    "options": "The options types (`mongodb::options`): builders, fields, variants, methods.",
    "types": "Everything else public: errors, events, results, root types, constants.",
}


def kind_of(item):
    return next(iter(item["inner"]))


def emit_type(surface, prog, id_, path, item):
    kind = kind_of(item)
    inner = item["inner"][kind]
    generics = inner.get("generics", {"params": [], "where_predicates": []})
    subst = substitute(surface, generics, {})
    try:
        self_rendered = self_type(surface, id_, path, generics, subst)
    except Unrenderable:
        return
    # Fields.
    if kind == "struct" and "plain" in inner["kind"]:
        for fid in inner["kind"]["plain"]["fields"]:
            field = surface.item(fid)
            if field is None or field.get("visibility") != "public":
                continue
            try:
                fty = Renderer(surface, subst).ty(field["inner"]["struct_field"])
            except Unrenderable as e:
                prog.check("field", f"{path}.{field['name']} (type not renderable: {e})",
                           f"    let _ = &any::<{self_rendered}>().{field['name']};")
                continue
            prog.check("field", f"{path}.{field['name']}",
                       f"    let _: &{fty} = &any::<{self_rendered}>().{field['name']};")
    # Variants.
    if kind == "enum":
        for vid in inner["variants"]:
            variant = surface.item(vid)
            vkind = variant["inner"]["variant"]["kind"]
            vname = f"{path}::{variant['name']}"
            lines = []
            pattern = f"{vname} {{ .. }}"
            try:
                if isinstance(vkind, dict) and "tuple" in vkind:
                    names = []
                    for i, fid in enumerate(vkind["tuple"]):
                        if fid is None:
                            continue
                        fty = Renderer(surface, subst).ty(surface.item(fid)["inner"]["struct_field"])
                        names.append(f"f{i}")
                        lines.append(f"        let _: &{fty} = &f{i};")
                    if names:
                        pattern = f"{vname}({', '.join(names)}, ..)"
                elif isinstance(vkind, dict) and "struct" in vkind:
                    names = []
                    for fid in vkind["struct"]["fields"]:
                        field = surface.item(fid)
                        fty = Renderer(surface, subst).ty(field["inner"]["struct_field"])
                        names.append(field["name"])
                        lines.append(f"        let _: &{fty} = &{field['name']};")
                    if names:
                        pattern = f"{vname} {{ {', '.join(names)}, .. }}"
            except Unrenderable as e:
                if "async-only" in str(e):
                    prog.count["excluded (async-only)"] += 1
                    continue
                lines = []
                pattern = f"{vname} {{ .. }}"
            body = "\n".join(lines)
            prog.check("variant", vname,
                       f"    match any::<{self_rendered}>() {{\n        {pattern} => {{\n{body}\n        }}\n        _ => {{}}\n    }}")
    # Impls.
    builder = False
    constructor = CONSTRUCTORS.get(str(id_))
    positions = position_types(surface, inner.get("impls", []))
    for impl_id in inner.get("impls", []):
        impl_item = surface.item(impl_id)
        if impl_item is None:
            continue
        impl_ = impl_item["inner"]["impl"]
        if impl_.get("blanket_impl") is not None:
            continue
        try:
            impl_rendered, isubst = impl_self(surface, impl_, {}, positions)
        except Unrenderable:
            continue
        trait = impl_.get("trait")
        if trait is not None:
            # An impl generic over what it converts from (`impl<E> From<E>
            # for Error where ErrorKind: From<E>`) has no one instance to check.
            for_text = json.dumps(impl_["for"])
            if any(f'"generic": "{n}"' not in for_text for n, _ in generic_params(impl_["generics"])):
                prog.count["trait (generic impl, unchecked)"] += 1
                continue
            surface.twinned = False
            try:
                Renderer(surface, isubst).ty(impl_["for"])
            except Unrenderable:
                continue
            if surface.twinned:
                continue  # an impl on an async handle
            try:
                tr = Renderer(surface, isubst, hr=True).path(trait)
            except Unrenderable as e:
                if "async-only" in str(e):
                    prog.count["excluded (async-only)"] += 1
                continue
            if impl_.get("is_negative") or tr.split("<")[0].split("::")[-1] in UNCHECKED_TRAITS:
                continue
            if "'l" in tr:
                tr = f"for<'l> {tr}"
            recv = receiver_for(surface, impl_, constructor)
            if recv:
                label = "auto trait" if impl_.get("is_synthetic") else "trait"
                prog.check(label, f"impl {tr} for {path}",
                           f"    fn has<X: ?Sized + {tr}>(_: &X) {{}}\n    has(&{recv});")
                continue
            label = "auto trait" if impl_.get("is_synthetic") else "trait"
            if label == "auto trait" and tr.split("::")[-1] not in ("Send", "Sync"):
                continue
            prog.check(label, f"impl {tr} for {impl_rendered}",
                       f"    fn has<X: ?Sized + {tr}>() {{}}\n    has::<{impl_rendered}>();")
            continue
        for mid in impl_["items"]:
            m = surface.item(mid)
            if m is None or m.get("visibility") != "public" or kind_of(m) != "function":
                continue
            if m["name"] == "builder" and not m["inner"]["function"]["sig"]["inputs"]:
                builder = True
            try:
                body = method_check(surface, m, impl_rendered, isubst,
                                    receiver_for(surface, impl_, constructor))
            except Unrenderable as e:
                if "async-only" in str(e):
                    prog.count["excluded (async-only)"] += 1
                    continue
                prog.check("method (unrenderable)", f"{path}::{m['name']}: {e}",
                           f"    let _ = <{impl_rendered}>::{m['name']};")
                continue
            if body is not None:
                prog.check("method", f"{path}::{m['name']}", body)
    if builder and kind == "struct" and "plain" in inner["kind"]:
        emit_builder(surface, prog, path, inner, subst, self_rendered)


def emit_builder(surface, prog, path, inner, subst, self_rendered):
    chain = []
    for fid in inner["kind"]["plain"]["fields"]:
        field = surface.item(fid)
        if field is None or field.get("visibility") != "public":
            continue
        if builder_skips(field):
            continue
        t = field["inner"]["struct_field"]
        # `setter(into)` on an `Option<X>` field: users pass an `X`.
        if "resolved_path" in t and t["resolved_path"].get("path", "").split("::")[-1] == "Option":
            t = t["resolved_path"]["args"]["angle_bracketed"]["args"][0]["type"]
        try:
            arg = Renderer(surface, subst).ty(t)
        except Unrenderable:
            continue
        call = f".{field['name']}(any::<{arg}>())"
        chain.append(call)
        prog.check("builder setter", f"{path}::builder(){call}",
                   f"    let _ = <{self_rendered}>::builder(){call};")
    prog.check("builder build", f"{path}::builder() with every setter",
               f"    let _: {self_rendered} = <{self_rendered}>::builder()\n        "
               + "\n        ".join(chain + [".build()"]) + ";")


def builder_skips(field):
    """Whether the field's typed-builder attribute skips its setter (rustdoc
    drops derive-helper attributes, so they are read from the source)."""
    span = field.get("span")
    if not span:
        return False
    lines = open(span["filename"]).read().split("\n")[: span["begin"][0] - 1]
    attrs = []
    for line in reversed(lines):
        text = line.strip()
        if text.startswith("#[") or text.startswith("///") or text.startswith("//") or not text:
            attrs.append(text)
            continue
        if text.endswith(")]") or text.endswith(")") or text.endswith("("):
            attrs.append(text)  # an attribute spanning lines
            continue
        break
    text = " ".join(a for a in reversed(attrs) if not a.startswith("//"))
    return any("skip" in b for b in re.findall(r"#\[builder\((.*?)\)\]", text))


def emit_trait(surface, prog, path, item):
    inner = item["inner"]["trait"]
    for mid in inner["items"]:
        m = surface.item(mid)
        if m is None or kind_of(m) != "function":
            continue
        try:
            body = method_check(surface, m, "X", {"Self": "X"})
        except Unrenderable as e:
            continue
        if body is None:
            continue
        prog.check("trait method", f"{path}::{m['name']}",
                   f"    fn call<X: {path}>() {{\n    {body}\n    }}")


class Differences:
    """`.ci/compat-surface-differences`: what the official sync API has and
    this crate does not (yet), as regular expressions over a check's label
    and source, grouped under a `# reason` line. Matching checks are left
    out of the programs and counted under their reason."""

    def __init__(self, path):
        self.rules = []  # (regex, reason)
        self.hits = defaultdict(int)
        reason = None
        for line in open(path):
            line = line.rstrip("\n")
            if line.startswith("# "):
                reason = line[2:]
            elif line.strip() and not line.startswith("#"):
                self.rules.append((re.compile(line.strip()), reason))

    def excluded(self, label, body):
        for regex, reason in self.rules:
            if regex.search(label) or regex.search(body):
                return reason
        return None


DIFFERENCES = None
CONSTRUCTORS = {}


def main():
    global DIFFERENCES
    here = __file__.rsplit("/", 1)[0]
    DIFFERENCES = Differences(f"{here}/compat-surface-differences")
    data = json.load(open(sys.argv[1]))
    out_dir = sys.argv[2] if len(sys.argv) > 2 else "tests/compat/programs"
    surface = Surface(data)
    CONSTRUCTORS.update(builder_constructors(surface))
    programs = {g: Program(f"surface_{g}", d) for g, d in GROUP_DOCS.items()}
    for path in sorted(surface.all_paths):
        prog = programs[group_of(path)]
        reason = DIFFERENCES.excluded(path, f"use {path} as _;")
        if reason is not None:
            prog.count["listed as different"] += 1
            DIFFERENCES.hits[reason] += 1
            continue
        prog.count["path"] += 1
        prog.uses.append(f"use {path} as _;\n")
    for id_, path in sorted(surface.public.items(), key=lambda kv: kv[1]):
        prog = programs[group_of(path)]
        item = surface.item(id_)
        kind = kind_of(item)
        if kind in ("struct", "enum"):
            emit_type(surface, prog, id_, path, item)
        elif kind == "trait":
            if path.split("::")[-1] in ASYNC_ONLY_TRAITS:
                continue
            emit_trait(surface, prog, path, item)
        elif kind == "function":
            parent = "::".join(path.split("::")[:-1])
            try:
                body = method_check(surface, item, parent, {})
            except Unrenderable:
                continue
            if body:
                prog.check("function", path, body.replace(f"<{parent}>::", f"{parent}::"))
        elif kind == "constant":
            try:
                ty = Renderer(surface, {}).ty(item["inner"]["constant"]["type"])
                prog.check("constant", path, f"    let _: {ty} = {path};")
            except Unrenderable:
                pass
    total = defaultdict(int)
    for prog in programs.values():
        with open(f"{out_dir}/{prog.name}.rs", "w") as f:
            f.write(prog.source())
        # As `cargo fmt --all` (CI) leaves them.
        subprocess.run(["rustfmt", "--edition", "2024", f"{out_dir}/{prog.name}.rs"], check=True)
        for k, v in prog.count.items():
            total[k] += v
        print(prog.name, dict(prog.count))
    print("total", dict(total))
    for reason, n in DIFFERENCES.hits.items():
        print(f"listed as different: {n:5}  {reason}")


if __name__ == "__main__":
    main()
