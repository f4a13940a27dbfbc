"""The type stubs (dlock/__init__.pyi) name everything the module exports,
and every public method of its classes, so editors and mypy see the API."""
import ast
import inspect
import os

import dlock


def stub_tree():
    path = os.path.join(os.path.dirname(dlock.__file__), "__init__.pyi")
    return ast.parse(open(path).read())


def test_stubs_name_every_export_and_method():
    tree = stub_tree()
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    names = set(classes) | {t.id for node in tree.body if isinstance(node, ast.AnnAssign) for t in [node.target]}
    missing = [name for name in dlock.__all__ if name not in names]
    assert not missing, missing

    def stubbed(cls_name):
        out = set()
        node = classes[cls_name]
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.add(item.name)
            elif isinstance(item, ast.AnnAssign):
                out.add(item.target.id)
        for base in node.bases:
            if isinstance(base, ast.Name) and base.id in classes:
                out |= stubbed(base.id)
        return out

    for cls_name in ("Client", "Lock", "Redlock", "Semaphore", "RwLock", "Masters"):
        public = {n for n, _ in inspect.getmembers(getattr(dlock, cls_name)) if not n.startswith("_")}
        assert public <= stubbed(cls_name), (cls_name, public - stubbed(cls_name))


def test_every_errc_code_has_its_class():
    classes = [getattr(dlock, n) for n in dlock.__all__]
    codes = {c.code for c in classes if isinstance(c, type) and issubclass(c, dlock.Error) and c is not dlock.Error}
    assert codes == set(dlock._dlock.ERRC)
    assert issubclass(dlock.LockRevoked, dlock.LeaseLost) and issubclass(dlock.InvalidArgument, ValueError)
