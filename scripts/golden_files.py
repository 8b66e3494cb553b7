"""The golden-file bookkeeping the PTX replays share (scripts/golden_ptx.py for kernels/*.mlir,
scripts/golden_ptx_python.py for the Python kernel library): each generated text is compared
with its golden file (a short unified diff when it differs) or, with --update, written over it;
golden files no case produced any more are stale."""
import difflib
import pathlib


class GoldenSet:
    """The golden files of one directory, `label` naming them in diffs ("golden/python")."""

    def __init__(self, directory: pathlib.Path, label: str):
        self.directory = directory
        self.label = label
        self.expected = set()
        self.changed = []

    def record(self, name: str, text: str, update: bool):
        """Checks (or with `update` rewrites) the golden file `name` against `text`."""
        golden = self.directory / name
        self.expected.add(name)
        if update:
            if not golden.exists() or golden.read_text() != text:
                golden.write_text(text)
                self.changed.append(name)
            return
        if not golden.exists():
            self.changed.append(f"{name}: no golden file (run with --update)")
            return
        old = golden.read_text()
        if old != text:
            diff = list(difflib.unified_diff(old.splitlines(), text.splitlines(),
                                             f"{self.label}/{name}", "now", lineterm="", n=2))
            self.changed.append(f"{name}: {len(diff)} diff lines\n" + "\n".join(diff[:60]))

    def finish(self, update: bool, what: str, command: str, summary: str) -> int:
        """Removes (update) or reports stale files, prints the outcome and returns the exit
        status: 0 when every file is identical (or was rewritten), 1 otherwise. `what` names
        the replay in messages, `command` is the script to run with --update, `summary` ends
        the success line ("22 files", "57 cases, 114 files")."""
        stale = sorted(p.name for p in self.directory.glob("*.ptx")
                       if p.name not in self.expected)
        if update:
            for name in stale:
                (self.directory / name).unlink()
            print(f"{what}: {summary}, {len(self.changed)} rewritten, {len(stale)} removed")
            return 0
        changed = list(self.changed)
        if stale:
            changed.append(f"golden files without a case: {stale} (run with --update)")
        if changed:
            print("\n\n".join(changed))
            print(f"\n{what}: {len(changed)} of {len(self.expected)} differ; if the change is "
                  f"meant, run {command} --update and commit the files")
            return 1
        print(f"{what}: {summary} identical")
        return 0
