"""Read OpenAPI documents from local files and resolve their `$ref`s, across files, without the network.

`referencing` (the resolver under `jsonschema` and `jsonschema-path`) joins URIs, retrieves the other
files on demand and walks JSON pointers; this module only decides what may be retrieved: local files.
"""

from __future__ import annotations

import datetime
import json
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit
from urllib.request import url2pathname

import yaml
from referencing import Registry, Resource
from referencing.exceptions import Unresolvable

from mcp_sim.base.errors import McpSimError, yaml_failure

# A URL, not a path: a scheme of two or more letters (so that C:/ stays a Windows path).
URL_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:/")
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class OpenAPIImportError(McpSimError):
    """The OpenAPI document cannot be imported; the message names the document and the JSON pointer."""


class UnconvertibleError(McpSimError):
    """One part of the document (an operation, a schema) cannot be converted; the rest still can."""


def is_url(text: str) -> bool:
    return bool(URL_RE.match(text))


def read_document(path: Path, shown: str | None = None) -> Any:
    """Parse a local JSON or YAML file into plain JSON data (string keys, no dates)."""
    shown = shown or str(path)
    if is_url(str(path)):
        raise OpenAPIImportError(f"{shown}: only local files are imported; download the document first "
                                 "(e.g. curl -o api.yaml URL) and import that file")
    try:
        text = Path(path).read_text(encoding="utf-8-sig")  # -sig: a UTF-8 BOM (.NET writes one) is dropped
    except (OSError, UnicodeDecodeError) as exc:
        raise OpenAPIImportError(f"{shown}: cannot read: {exc}") from None
    try:
        if Path(path).suffix.lower() == ".json":
            return json.loads(text)
        return _plain(yaml.load(text, Loader=YAML_LOADER))
    except yaml.YAMLError as exc:
        raise OpenAPIImportError(f"{shown}: not valid YAML: {yaml_failure(exc)}") from None
    except ValueError as exc:  # bad JSON, and integers past Python's 4300-digit limit in either
        raise OpenAPIImportError(f"{shown}: not valid {'JSON' if Path(path).suffix.lower() == '.json' else 'YAML'}: "
                                 f"{exc}") from None
    except RecursionError:
        raise OpenAPIImportError(f"{shown}: nested too deeply (a recursive YAML alias?)") from None


def _plain(node: Any) -> Any:
    """YAML gives integer keys (`200:`) and dates; JSON Schema and OpenAPI mean strings."""
    if isinstance(node, dict):
        return {_key(key): _plain(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_plain(item) for item in node]
    if isinstance(node, (datetime.date, datetime.datetime)):
        return node.isoformat()
    return node


def _key(key: Any) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    return key if isinstance(key, str) else str(key)


def escape(part: str | int) -> str:
    """One JSON pointer segment (RFC 6901)."""
    return str(part).replace("~", "~0").replace("/", "~1")


class RefResolver:
    """Looks up `$ref`s from a root document; other local files are read once, URLs are refused."""

    def __init__(self, path: Path, contents: Any, shown: str | None = None):
        self.root_uri = Path(path).resolve().as_uri()
        self._shown_root = shown or str(path)
        self._files: dict[str, Resource[Any]] = {}
        resource: Resource[Any] = Resource.opaque(contents)
        # Opaque resources: OpenAPI 2.0/3.0 have no `$id`, so a document's base URI is where it was read from.
        # `retrieve` is an attrs alias of the private field, which mypy does not see.
        registry: Registry[Any] = Registry(retrieve=self._retrieve)  # type: ignore[call-arg]
        self._registry = registry.with_resource(self.root_uri, resource)

    def lookup(self, ref: str, base: str, where: str) -> tuple[Any, str, str]:
        """The target of `ref` written at `where` in the document at `base`: (contents, its base, its pointer)."""
        uri = urljoin(base, ref)
        target_base, fragment = urldefrag(uri)
        if not fragment.startswith("/") and fragment:
            raise UnconvertibleError(f"{where}: $ref {ref!r} uses an anchor; only JSON pointers are supported")
        try:
            resolved = self._registry.resolver(base).lookup(ref)
        except Unresolvable as exc:
            raise UnconvertibleError(f"{where}: $ref {ref!r} {self._why(exc, target_base)}") from None
        except (ValueError, TypeError):  # a pointer that walks into a string or number
            raise UnconvertibleError(f"{where}: $ref {ref!r} points to nothing in {self.shown(target_base)}") from None
        return resolved.contents, target_base, fragment

    def shown(self, uri: str, pointer: str | None = None) -> str:
        """A location as people read it: the file as given (or relative to it) and the JSON pointer."""
        base = urldefrag(uri)[0]
        if base == self.root_uri:
            name = self._shown_root
        elif base.startswith("file:"):
            root_dir = Path(url2pathname(urlsplit(self.root_uri).path)).parent
            relative = os.path.relpath(url2pathname(urlsplit(base).path), root_dir)
            name = str(Path(self._shown_root).parent / relative)
        else:
            name = base
        return name if pointer is None else f"{name}#{pointer}"

    def _why(self, exc: Unresolvable, target_base: str) -> str:
        cause = exc.__cause__.__cause__ if exc.__cause__ is not None else None
        if isinstance(cause, (OpenAPIImportError, UnconvertibleError)):
            return f"cannot be followed: {cause}"
        return f"points to nothing in {self.shown(target_base)}"

    def _retrieve(self, uri: str) -> Resource[Any]:
        if not uri.startswith("file:"):
            raise UnconvertibleError(f"{uri} is not a local file; remote $refs are not fetched: download the file "
                                     "and refer to it by a relative path")
        if uri not in self._files:
            path = Path(url2pathname(urlsplit(uri).path))
            self._files[uri] = Resource.opaque(read_document(path, self.shown(uri)))
        return self._files[uri]
