"""A timing worker: one implementation, answering the trusted side's commands.

The job (JSON on stdin) names one implementation file and a command pipe (a FIFO in the
worker's own folder). Each command is one JSON line with a sequence number; each answer
is one keyed line on the result channel echoing it. Until `load`, no implementation code
has run in this process: non-candidate workers calibrate their idle probe first, while no
candidate code exists anywhere. Between its turns the trusted side keeps this process
stopped (SIGSTOP), so nothing here runs while another implementation is timed.

Commands: calibrate, load, prepare, rough, probe, method, batch, through, idle, end,
output, profile, stop (trusted/launch/workers.py drives them; trusted/clock/interleave.py
says when and why).
Untrusted side: what it reports is checked there against the trusted clock and the
reference.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import torch

from kernelloop.evaluate.protocol import idle_stats
from kernelloop.evaluate.worker import calls as inworker
from kernelloop.evaluate.worker import guard, userland
from kernelloop.evaluate.worker.compiled import Compiled, compiled_entry
from kernelloop.evaluate.worker.gpu_device import GpuDevice, IdleProbe
from kernelloop.evaluate.worker.gpu_timer import GpuSlot
from kernelloop.evaluate.worker.outbox import Outbox, open_outbox
from kernelloop.evaluate.worker.timing import CpuSlot
from kernelloop.task.kernelbench_inputs import entry_function

_loads = json.loads


def _import_file(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _commands(path: str):
    with open(path, encoding="utf-8") as f:  # noqa: PTH123 - a FIFO, read line by line
        for line in f:
            if line.strip():
                yield _loads(line)


def _tail(e: BaseException) -> str:
    return inworker.error_tail(e)


class Server:
    def __init__(self, job: dict, send, harness_modules: list, marker: str) -> None:
        self.job, self.send, self.harness, self.marker = job, send, harness_modules, marker
        self.cuda = job["device"] == "cuda"
        self.dev: GpuDevice | None = None
        self.probe: IdleProbe | None = None
        self.fn = self.make_inputs = self.module = None
        self.counter = inworker.LaunchCounter()
        self.audit: inworker.TimedLaunchAudit | None = None
        self.integrity: guard.Integrity | None = None
        self.slot = None
        self.spec: dict = {}
        self.compiled: Compiled | None = None  # the "compiled" slot's op (worker/compiled.py)
        self.outbox: Outbox | None = None  # opened by `load`, before the implementation is imported

    def _device(self) -> GpuDevice:
        if self.dev is None:
            self.dev = GpuDevice()
        return self.dev

    # ---- commands -----------------------------------------------------------------
    def calibrate(self, cmd: dict) -> dict:
        """Idle-probe calibration (GPU): taken before any candidate code has run."""
        if not self.cuda:
            return {"probes": []}
        self._device().ramp(
            float(cmd.get("ramp_s", 0.0))
        )  # calibrated at working clocks, not idle ones
        self.probe = IdleProbe()
        probes = [self.probe.run(1)[0] for _ in range(int(cmd.get("n", 30)))]
        self.probe.cal = idle_stats(probes)
        return {"probes": probes}

    def load(self, cmd: dict) -> dict:
        job = self.job
        self.integrity = guard.Integrity(self.harness)  # before the implementation's code runs
        self.outbox = open_outbox(job, lambda m: print(m, file=sys.stderr))
        if job["device"] == "cpu" and job.get("cpu_threads"):
            torch.set_num_threads(int(job["cpu_threads"]))
        if self.cuda:
            self._device()
        self.make_inputs = getattr(
            _import_file(job["inputs_file"], "kernelloop_task_inputs"), job["inputs_func"]
        )
        self.module = userland.import_as_user(job["impl"])  # as a user's `import <stem>`
        fn = entry_function(self.module, job["entry"], job.get("model_class"))
        if job.get("compile"):  # the "compiled" slot: the reference under torch.compile
            fn = self.compiled = compiled_entry(fn, job["compile"], self.module)
        self.counter.attach(self.module, job["name"])
        if job.get("audit") and self.counter.attached(job["name"]):
            fn = self.audit = inworker.TimedLaunchAudit(fn, self.counter, job["name"])
        self.fn = fn
        return {
            "kernels": self.counter.kernels[job["name"]],
            "tampered": self.integrity.changed()[:10],
        }

    def _new_slot(self, cmd: dict):
        """One shape's slot: its inputs (from the command's seed) and how to make more."""
        dtype = getattr(torch, cmd["dtype"])
        dev = self.job["device"]
        dims = cmd["dims"]
        spec = {**cmd.get("settings", {}), "input_seed": int(cmd["input_seed"])}

        def make(seed: int) -> dict:
            g = torch.Generator(device=dev).manual_seed(seed)
            made = self.make_inputs(dims, dtype, dev, g, "random")
            userland.HIDER.hide()  # the generator's lazy imports, out of sight again
            return made

        inputs = make(int(cmd["input_seed"]))
        kwargs = {**self.job["params"], **cmd.get("params", {})}
        if self.cuda:
            return GpuSlot(self._device(), self.fn, inputs, make, kwargs, spec)
        return CpuSlot(self.fn, inputs, make, kwargs, spec)

    def prepare(self, cmd: dict) -> dict:
        if self.cuda:
            self._device().ramp(float(cmd.get("ramp_s", 0.0)))
        self.slot = self._new_slot(cmd)
        self.spec = self.slot.spec
        if self.compiled is not None:  # its compiles belong here; one while timed is refused
            with self.compiled.preparing():
                return self.slot.prepare()
        return self.slot.prepare()

    def rough(self, cmd: dict) -> dict:
        if self.cuda:
            self.dev.measure_spin()  # alone on a warm GPU (the warm-ups just ran)
        return {"ms": self.slot.rough()}

    def escape(self, cmd: dict) -> dict:
        return self.slot.escape_probe(float(cmd["rough_ms"]))

    def method(self, cmd: dict) -> dict:
        if not self.cuda:
            return {"ok": True, "error": ""}
        return self.slot.set_method(
            cmd["kind"], int(cmd.get("sets", 1)), int(cmd.get("n_calls", 1))
        )

    def batch(self, cmd: dict) -> dict:
        n, seed, key = int(cmd["n"]), int(cmd["seed"]), int(cmd["key"])

        def run() -> dict:
            if self.cuda:
                self.dev.ramp(float(cmd.get("ramp_ms", 0.0)) / 1e3)
                return self.slot.batch(n, int(cmd.get("cal_every", 1)), seed, key)
            return self.slot.batch(n, seed, key, self._sets(cmd.get("inputs")))

        return self._framed(cmd, run)

    def through(self, cmd: dict) -> dict:
        """A run-through batch for the trusted clock (GpuSlot.through; GPU only), with the
        same idle probes and launch audit as `batch`."""
        n, seed, key = int(cmd["n"]), int(cmd["seed"]), int(cmd["key"])

        def made() -> None:  # the inputs are made: the trusted clock's split point
            self.send("made", seq=cmd["seq"])

        return self._framed(cmd, lambda: self.slot.through(n, seed, key, made))

    def idle(self, cmd: dict) -> dict:
        """The idle probe on its own (GPU), around a run-through batch: a calibrated worker's
        tries are judged by the trusted side; an uncalibrated one (the candidate's) runs the
        same copy so that every worker's GPU is in the same state when its batch starts, and
        its tries are ignored."""
        if not self.cuda:
            return {"tries": []}
        if self.probe is None:
            self.probe = IdleProbe()
        tries = self.probe.check()
        return {"tries": tries if self.probe.cal is not None else []}

    def _framed(self, cmd: dict, run) -> dict:
        """`run()`'s answer between the idle probes (when asked for), with the launch audit's
        count of calls that launched nothing and the tamper tripwire's findings."""
        before = self.audit.without_launch if self.audit else 0
        pre = self.probe.check() if (self.probe is not None and cmd.get("probe")) else []
        got = run()
        post = self.probe.check() if (self.probe is not None and cmd.get("probe")) else []
        return {
            **got,
            "no_launch": (self.audit.without_launch - before) if self.audit else 0,
            "pre": pre,
            "post": post,
            "tampered": self.integrity.changed()[:10],
        }

    def _sets(self, name: str | None) -> list[dict] | None:
        """The batch's inputs the trusted side handed over (a file in this worker's folder)."""
        if not name:
            return None
        path = Path(self.job["out_dir"]).parent / Path(str(name)).name
        sets = torch.load(path, weights_only=True)
        path.unlink()
        return sets

    def end(self, cmd: dict) -> dict:
        return {"cals": self.slot.top_up() if self.cuda else []}

    def output(self, cmd: dict) -> dict:
        """One of the last batch's timed outputs, shown for an audit: into the shared output
        slot where this worker has one and it fits, else into the file the command names."""
        name = Path(str(cmd["file"])).name  # a bare name in this worker's own out_dir
        out = self.slot.kept[int(cmd["index"])]
        nbytes = out.numel() * out.element_size()
        if self.outbox is not None and self.outbox.fits(nbytes):
            at = self.outbox.put(inworker.raw_bytes(out))
            if self.cuda:
                torch.cuda.synchronize()  # the copy is complete before the slot is named
            return {"file": "", "nbytes": nbytes, "slot": at}
        inworker.write_raw(out, Path(self.job["out_dir"]) / name)
        return {"file": name, "nbytes": nbytes}

    def profile(self, cmd: dict) -> dict:
        """The second timer on the shape the command names (after every shape's events:
        trusted/interleave_rounds._second_timer says why)."""
        if not self.cuda:
            return {"ms": None}
        self.slot = None  # the last shape's inputs and kept outputs are released first
        return {"ms": self._new_slot(cmd).profile()}

    def stop(self, cmd: dict) -> dict:
        job = self.job
        strays = guard.stray_processes(bool(job.get("private_pid_namespace")), self.marker)
        return {
            "tampered": self.integrity.changed()[:10] if self.integrity else [],
            "strays": strays[:10],
            "stray_count": len(strays),
            "audit_calls": self.audit.calls if self.audit else 0,
            "without_launch": self.audit.without_launch if self.audit else 0,
        }


HANDLERS = {
    "calibrate": ("calibrated", Server.calibrate),
    "load": ("loaded", Server.load),
    "prepare": ("prepared", Server.prepare),
    "rough": ("rough", Server.rough),
    "probe": ("probed", Server.escape),
    "method": ("method", Server.method),
    "batch": ("batch", Server.batch),
    "through": ("through", Server.through),
    "idle": ("idle", Server.idle),
    "end": ("ended", Server.end),
    "output": ("output", Server.output),
    "profile": ("profiled", Server.profile),
    "stop": ("stopped", Server.stop),
}


def serve(job: dict, send, harness_modules: list, marker: str) -> int:
    server = Server(job, send, harness_modules, marker)
    # Only the reference worker describes the machine (the record's device, versions); the
    # others skip it (it imports triton: ~0.6 s of each worker's start on a loaded runner).
    send("hello", seq=0, env=inworker.environment(job["device"]) if job.get("describe") else {})
    for cmd in _commands(job["commands"]):
        seq, kind = cmd.get("seq"), cmd.get("cmd")
        if kind not in HANDLERS:
            send("error", seq=seq, error=f"unknown command {kind!r}", fatal=True)
            return 0
        reply, handler = HANDLERS[kind]
        try:
            got = handler(server, cmd)
        except BaseException as e:  # noqa: BLE001 - reported; the trusted side decides
            if kind == "load":
                send("import_error", seq=seq, error=_tail(e))
            else:
                send("error", seq=seq, error=_tail(e), fatal=inworker.sticky_cuda_error(e))
            continue
        send(reply, seq=seq, **got)
        if kind == "stop":
            return 0
    return 0
