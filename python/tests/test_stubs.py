"""The type stubs (dlock/__init__.pyi) name everything the module exports,
and every public method of its classes, so editors and mypy see the API."""
import ast
import inspect
import os

import pytest

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


def test_mypy_reads_the_documented_uses_by_the_stubs(tmp_path, monkeypatch):
    """mypy (Debian's, which ./run installs) checks a program using the API
    as the README and docstrings show it against the stubs, strictly, and
    finds exactly the one call that is wrong."""
    api = pytest.importorskip("mypy.api")
    program = tmp_path / "use.py"
    program.write_text('''
import asyncio
import datetime
from typing import Dict, List, Optional, Union

import dlock

client = dlock.Client("redis://127.0.0.1:6379")
lock = client.lock("orders:42", lease=datetime.timedelta(seconds=30))
with lock:
    token: int = lock.fencing_token
    saved = lock.lost
    if saved.is_set() or saved.wait(0.1):
        raise SystemExit("lost the lock")
ok: bool = lock.acquire(blocking=True, timeout=2.0)
lock.release()
why: Optional[str] = saved.reason
raw: Union[str, bytes] = client.lock(b"\\xff", on_lost=print).name
tokens: Dict[Union[str, bytes], int] = client.multi_lock(["a", b"b"]).fencing_tokens
with client.rw_lock("rw").read():
    pass
with client.semaphore("s", 3) as sem:
    held: int = sem.permits_held
with dlock.Masters(["redis://a", "redis://b", "redis://c"]) as masters:
    assert dlock.Redlock(masters, "n").masters is masters
try:
    lock.release()
except dlock.ClientClosed:
    pass
except dlock.LeaseLost as e:
    reason: Optional[str] = e.reason


async def main() -> None:
    async with client.fair_lock("a"):
        pass
    await lock.acquire_async(timeout=datetime.timedelta(seconds=1))
    await lock.release_async()

asyncio.run(main())
client.lock(42)  # the one error
''')
    monkeypatch.setenv("MYPYPATH", os.path.dirname(os.path.dirname(os.path.abspath(dlock.__file__))))
    wrong = program.read_text().splitlines().index("client.lock(42)  # the one error") + 1
    out, err, _ = api.run(["--strict", "--no-error-summary", "--cache-dir", str(tmp_path / "cache"), str(program)])
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert len(errors) == 1 and "use.py:%d:" % wrong in errors[0] and '"lock" of "Client"' in errors[0], (out, err)
