"""Which device a run computes on: ``cpu``, ``gpu`` or ``auto`` (the default of the commands).

``auto`` keeps small programs on the CPU and sends large ones to an accelerator. An accelerator
computes a big grid 20-100x faster than the CPU cores of the same machine (measured on one H200
against its 16 cores: 63-110x for the bandit at 64-4096 seeds, 35x for the tree bench, 19x for the
expected flow), but a command pays a fixed cost there first (starting the device and compiling for it).
Measured on that machine, in fresh processes: ``tabsim reproduce`` took 12.1 s on the GPU against
4.75 s on the CPU (7.4 s more, nearly all fixed cost), ``--scale heavy`` 12.6 s against 7.1 s and
``--seeds 1024`` 13.6 s against 12.0 s, whose 4.8e9 units of work took the 16 cores about 7.3 s
(4e7 units per core and second). So the accelerator pays off where the CPU's cores would take longer
than :data:`GPU_EXTRA_SECONDS` (8 s): above :func:`gpu_threshold` units of work (a unit is a sampled
token or a policy-table entry of one update, :func:`tabsim.runtime.planning.run_work`), 5.1e9 on 16 cores
and 6.4e8 on 2. The reference study (7.7e7 units) and ``--seeds 1024`` (4.8e9) stay on the CPU of a
16-core machine; a 4096-seed grid of 1024 prompts (8e9-1.5e10) goes to the GPU.

The option is resolved once where a run starts (an argument, else the command's ``--device``, else
``$TABSIM_DEVICE``, else ``auto``: :func:`tabsim.base.defaults.device_choice`) and arrives here as an
argument; this module reads neither the command's options nor the environment for it. The planner
(:func:`tabsim.runtime.planning.plan`) picks the device with it (:func:`pick`, :func:`pool`) and the plan
carries the device to the compute stage, which does not come back here. A device that is not there is a
:class:`DeviceError` naming what is. Nothing here loads JAX at import (the commands' option parsing
imports this module).
"""
from __future__ import annotations

import importlib.metadata

from tabsim.base.host import cpu_count
from tabsim.base import defaults
from tabsim.base.defaults import DeviceChoice

CHOICES = ("auto", "cpu", "gpu")
GPU_PLATFORMS = ("gpu", "cuda", "rocm")
GPU_EXTRA_SECONDS = 8.0  # an accelerator's fixed cost over the CPU's, per command (start + compile)
CPU_UNITS_PER_CORE_SECOND = 4.0e7  # reproduce --seeds 1024 on 16 cores: 4.8e9 units in about 7.3 s
ENV = defaults.DEVICE  # the user's default choice (read by tabsim.base.defaults, never set by tabsim)


class DeviceError(ValueError):
    """The device asked for is not available; the message names what is."""


def check_choice(choice: str | None, what: str = "device") -> str | None:
    """``choice`` lower-cased if it is one of :data:`CHOICES` (or ``None``), else a :class:`DeviceError`."""
    if choice is None:
        return None
    text = str(choice).strip().lower()
    if text not in CHOICES:
        raise DeviceError(f"{what}: {choice!r} is not a device; allowed: {', '.join(CHOICES)}")
    return text


def resolved(choice: "DeviceChoice | str | None") -> DeviceChoice:
    """``choice`` as a checked :class:`DeviceChoice`: a resolved one as it is, a name (an argument of the
    caller's own) as that name, ``None`` as ``auto``. Never the command's option or the environment: those
    are resolved by the entry point (:func:`tabsim.base.defaults.device_choice`)."""
    if isinstance(choice, DeviceChoice):
        return DeviceChoice(check_choice(choice.name), choice.process)
    return DeviceChoice(check_choice(choice) or "auto")


def gpu_threshold(cores: int | None = None) -> float:
    """Units of work above which ``auto`` picks an accelerator: what the CPU's cores do in
    :data:`GPU_EXTRA_SECONDS`."""
    return GPU_EXTRA_SECONDS * CPU_UNITS_PER_CORE_SECOND * (cores or cpu_count())


def _gpu_plugins() -> list[str]:
    names = []
    for dist in importlib.metadata.distributions():
        name = (dist.metadata.get("Name") or "").lower()
        if name.startswith(("jax-cuda", "jax_cuda", "jax-rocm", "jax_rocm", "jaxlib-cuda")):
            names.append(f"{name} {dist.version}")
    return sorted(set(names))


def _start_failure(err: BaseException) -> DeviceError:
    """JAX could not start any backend (a ``JAX_PLATFORMS`` naming a platform this machine lacks)."""
    import jaxlib  # lazy: JAX loads only when a device is chosen

    asked = defaults.jax_platforms()
    detail = str(err).strip().splitlines()[0] if str(err).strip() else "no backend could be started"
    plugins = ", ".join(_gpu_plugins()) or "none"
    where = f"JAX_PLATFORMS={asked!r}" if asked else "its platforms"
    return DeviceError(f"JAX cannot start {where} here ({detail}; jaxlib {jaxlib.__version__}, GPU plugins: "
                       f"{plugins}); unset JAX_PLATFORMS or set it to cpu")


def devices(platform: str):
    """The devices of ``platform`` (``cpu``, or ``gpu`` for any GPU backend), ``[]`` if it has none."""
    import jax  # lazy: as above

    try:
        return list(jax.devices(platform))
    except RuntimeError:
        return []


def available() -> str:
    """What this process's JAX can compute on, e.g. ``cpu (2 devices)`` or ``gpu: NVIDIA H200 x1, cpu (16)``."""
    import jax  # lazy: as above

    try:
        jax.devices()
    except Exception as err:  # noqa: BLE001  (JAX raises RuntimeError or a bare AssertionError)
        raise _start_failure(err) from None
    parts = []
    gpus = devices("gpu")
    if gpus:
        parts.append(f"gpu: {gpus[0].device_kind} x{len(gpus)}")
    cpus = devices("cpu")
    if cpus:
        parts.append(f"cpu ({len(cpus)} device{'s' if len(cpus) > 1 else ''})")
    return ", ".join(parts) or "none"


def _started() -> None:
    import jax  # lazy: as above

    try:
        jax.devices()
    except Exception as err:  # noqa: BLE001  (JAX raises RuntimeError, or a bare AssertionError)
        raise _start_failure(err) from None


def pick(choice: "DeviceChoice | str | None", work: float | None = None):
    """The device for a run of ``work`` units (a ``jax.Device``), by ``choice`` (:func:`resolved`; ``None``:
    ``auto``): ``auto`` is a GPU when ``work`` is above :func:`gpu_threshold` and there is one, else the CPU
    (also when ``work`` is unknown).

    Where the choice is the process's own (``choice.process``: a command's, or the environment's) and lands
    on the CPU, JAX starts no accelerator backend at all (:func:`use_cpu_only_if_unstarted`)."""
    choice = resolved(choice)
    process, choice = choice.process, choice.name
    wants_gpu = choice == "gpu" or (choice == "auto" and work is not None and work > gpu_threshold())
    if wants_gpu:
        _started()
        gpus = devices("gpu")
        if gpus:
            return gpus[0]
        if choice == "gpu":
            import jaxlib  # lazy: as above

            raise DeviceError(f"--device gpu: no GPU is available to JAX here (jaxlib {jaxlib.__version__}, GPU "
                              f"plugins: {', '.join(_gpu_plugins()) or 'none'}); available: {available()}. "
                              "Install a GPU build of JAX (pip install 'jax[cuda12]') or use --device cpu")
    elif process:
        use_cpu_only_if_unstarted()
    _started()
    cpus = devices("cpu")
    if not cpus:
        raise DeviceError(f"--device {choice}: JAX has no CPU device here; available: {available()}")
    return cpus[0]


def check_startable(choice: "DeviceChoice | str") -> None:
    """What a command checks as it parses ``--device``, before it writes anything: an explicit device
    is there, and JAX can start the platforms the user named in ``JAX_PLATFORMS``."""
    if resolved(choice).name in ("cpu", "gpu"):
        pick(choice)
    elif defaults.jax_platforms():
        _started()


def pool(device) -> tuple:
    """Every device of this process on ``device``'s platform, ``device`` first: what a local run spreads its
    chunks over (one chunk per device at a time, :class:`tabsim.runtime.executors.LocalExecutor`). One GPU,
    or the CPU as JAX shows it by default, is a pool of one (the run as before). JAX shows several CPU devices
    only when asked (``XLA_FLAGS=--xla_force_host_platform_device_count=N``, before it starts)."""
    import jax  # lazy: as above

    if device is None:
        return ()
    try:
        local = list(jax.local_devices(backend=device.platform))
    except RuntimeError:
        local = []
    return (device,) + tuple(d for d in local if d != device)


def name(device) -> str:
    """``platform:id``, as provenance writes a device (``cpu:0``, ``gpu:3``)."""
    return f"{device.platform}:{device.id}"


def describe(device=None, choice: str | None = None, devices=None) -> dict:
    """What provenance records of the device a run used (``None``: JAX's default device), of the choice
    it was picked by (``choice``: the plan's ``device_choice``; None: not known), and of every device its
    chunks were computed on (``devices``, default the one device), as ``devices``."""
    import jax  # lazy: as above

    dev = device if device is not None else (jax.config.jax_default_device or jax.devices()[0])
    if isinstance(dev, str):  # a platform name given to JAX itself
        dev = jax.devices(dev)[0]
    return {"device": name(dev), "device_kind": dev.device_kind,
            "device_choice": choice,
            "devices": [name(d) for d in (devices or (dev,))]}


def use_cpu_only_if_unstarted() -> None:
    """For a command that computes on the CPU: keep JAX from starting an accelerator's backend at all
    (seconds of start-up on a GPU machine), unless the user set ``JAX_PLATFORMS`` themselves. Only the
    commands call this, before their first JAX computation; it is a no-op once JAX has started."""
    if defaults.jax_platforms():
        return
    import jax  # lazy: as above

    jax.config.update("jax_platforms", "cpu")
