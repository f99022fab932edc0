"""A user's own workload as its author configures it: `--init-args` (JSON) and `--config FILE.yaml`
in LightningCLI's layout, read into the module and DataModule to build and their constructor
arguments.

Torch-free: `advisor recommend` reads the same options to find the workload's id. A LightningCLI
config looks like this (the `trainer:` section and `seed_everything` are the probe's to decide and
are read past; a `model:` without `class_path` gives the arguments of the class named by --workload):

    model:
      class_path: mypkg.lm.TinyLM
      init_args: {d_model: 512, layers: 8}
    data:
      class_path: mypkg.data.TokenData
      init_args: {batch_size: 32}
    optimizer:                      # optional: replaces the module's configure_optimizers(),
      class_path: torch.optim.AdamW # as LightningCLI does (run/workloads.py applies it)
      init_args: {lr: 0.0003}
    lr_scheduler:                   # optional, with an optimizer: built on it
      class_path: CosineAnnealingLR # a bare name: torch.optim.lr_scheduler's
      init_args: {T_max: 1000}
"""

from __future__ import annotations

from dataclasses import dataclass, field

from safeio import mapping, read_document, read_document_file

CONFIG_KEYS = ("model", "data", "optimizer", "lr_scheduler", "trainer", "seed_everything", "ckpt_path")
# Where LightningCLI's shorthand class names are found (jsonargparse resolves a bare name among the
# subclasses torch defines): an optimizer in torch.optim, a scheduler in torch.optim.lr_scheduler,
# except ReduceLROnPlateau, LightningCLI's own subclass that carries the metric to monitor.
SHORT_NAMES = {"optimizer": "torch.optim.{}", "lr_scheduler": "torch.optim.lr_scheduler.{}"}
PLATEAU = "lightning.pytorch.cli.ReduceLROnPlateau"
MAX_CONFIG_BYTES = 1 << 20


class WorkloadConfigError(ValueError):
    """--init-args or --config cannot be used; the message is one line for the user."""


@dataclass
class UserWorkload:
    model: str | None = None  # "package.module:Class"
    datamodule: str | None = None
    init_args: dict = field(default_factory=dict)
    data_init_args: dict = field(default_factory=dict)
    batch_size: int | None = None  # a batch_size among the arguments: where the probe's search starts
    # LightningCLI's optimizer: / lr_scheduler: sections, as {"class_path": dotted, "init_args": {...}}
    optimizer: dict | None = None
    lr_scheduler: dict | None = None


def class_ref(path: object, where: str) -> str:
    """LightningCLI's dotted "package.module.Class" (or our "package.module:Class") as ours."""
    if not isinstance(path, str) or not path.strip():
        raise WorkloadConfigError(f"{where}: class_path must be 'package.module.Class'")
    if ":" in path:
        return path
    mod, _, name = path.rpartition(".")
    if not mod:
        raise WorkloadConfigError(f"{where}: class_path {path!r} must be 'package.module.Class'")
    return f"{mod}:{name}"


def parse_init_args(text: str, option: str) -> dict:
    """--init-args and friends: a JSON object, read by the one structured reader (depth bounded)."""
    try:
        v = read_document(text, option, "json", WorkloadConfigError)
    except WorkloadConfigError as e:
        raise WorkloadConfigError(f"{e}; give an object such as '{{\"d_model\": 512}}'") from None
    return mapping(v, option, WorkloadConfigError, "a JSON object of constructor arguments, such as "
                   "'{\"d_model\": 512}'")


def _arguments(value: dict, where: str, what: str) -> dict:
    """init_args and dict_kwargs of a section merged, each a mapping (absent or null: none)."""
    args = {}
    for key in ("init_args", "dict_kwargs"):
        part = value.get(key)
        if part is not None:
            args.update(mapping(part, f"{where}.{key}", WorkloadConfigError, f"a mapping of the {what}'s arguments"))
    return args


def _section(value: object, where: str) -> tuple[str | None, dict]:
    """A config's model: or data: section as (class, init args)."""
    if value is None:
        return None, {}
    if isinstance(value, str):  # `model: mypkg.lm.TinyLM`
        return class_ref(value, where), {}
    if not isinstance(value, dict):
        raise WorkloadConfigError(f"{where}: expected a mapping with class_path and init_args")
    if "class_path" in value:
        extra = set(value) - {"class_path", "init_args", "dict_kwargs"}
        if extra:
            raise WorkloadConfigError(f"{where}: unexpected key(s) {', '.join(sorted(map(str, extra)))} "
                                      "beside class_path and init_args")
        return class_ref(value["class_path"], f"{where}.class_path"), _arguments(value, where, "class")
    # LightningCLI(MyModel): the section holds the arguments themselves
    return None, dict(mapping(value, where, WorkloadConfigError))


def optimizer_section(value: object, kind: str, where: str) -> dict:
    """An optimizer: or lr_scheduler: section (or the --optimizer / --lr-scheduler value) as
    {"class_path": "package.module.Class", "init_args": {...}}: a class path, a bare class name
    (LightningCLI's shorthand: AdamW is torch.optim.AdamW), or a mapping with class_path and init_args.
    One spelling per class, so that the workload's id is the same however it was written."""
    if isinstance(value, str):
        value = {"class_path": value}
    if not isinstance(value, dict) or "class_path" not in value:
        raise WorkloadConfigError(f"{where}: give the {kind} as a class name or a mapping with class_path and "
                                  f"init_args, e.g. {{class_path: {'torch.optim.AdamW' if kind == 'optimizer' else 'StepLR'}, "
                                  f"init_args: {{...}}}}")
    extra = set(value) - {"class_path", "init_args", "dict_kwargs"}
    if extra:
        raise WorkloadConfigError(f"{where}: unexpected key(s) {', '.join(sorted(map(str, extra)))} "
                                  "beside class_path and init_args")
    path = value["class_path"]
    if not isinstance(path, str) or not all(p.isidentifier() for p in path.replace(":", ".").split(".")):
        raise WorkloadConfigError(f"{where}.class_path {path!r} is not a class name such as "
                                  f"{'AdamW or torch.optim.AdamW' if kind == 'optimizer' else 'StepLR'}")
    path = path.replace(":", ".")
    if "." not in path:
        path = PLATEAU if (kind, path) == ("lr_scheduler", "ReduceLROnPlateau") else SHORT_NAMES[kind].format(path)
    args = _arguments(value, where, kind)
    if kind == "optimizer" and "params" in args:
        raise WorkloadConfigError(f"{where}.init_args: params are the module's parameters, given by the probe as "
                                  "LightningCLI does; drop it")
    return {"class_path": path, "init_args": args}


def parse_class_option(text: str, kind: str, option: str) -> dict:
    """--optimizer / --lr-scheduler: a class name, or JSON as in a config's section."""
    text = text.strip()
    if text.startswith("{"):
        return optimizer_section(parse_init_args(text, option), kind, option)
    return optimizer_section(text, kind, option)


def read_config(path: str) -> UserWorkload:
    """A LightningCLI config file: YAML (PyYAML, which lightning installs), or JSON."""
    # YAML (PyYAML, which lightning installs) unless it ends in .json; size, depth and aliases bounded
    data = read_document_file(path, "--config", MAX_CONFIG_BYTES, WorkloadConfigError, default="yaml")
    if isinstance(data, dict) and "fit" in data and isinstance(data["fit"], dict):
        data = data["fit"]  # the subcommand's section of a whole-CLI config
    if not isinstance(data, dict) or not ({"model", "data"} & set(data)):
        raise WorkloadConfigError(f"--config {path}: not a LightningCLI config (no model: or data: section)")
    unknown = set(data) - set(CONFIG_KEYS)
    if unknown:
        raise WorkloadConfigError(
            f"--config {path}: section(s) {', '.join(sorted(map(str, unknown)))} cannot be applied by the probe "
            f"(it reads {', '.join(CONFIG_KEYS)})")
    model, margs = _section(data.get("model"), f"--config {path}: model")
    dm, dargs = _section(data.get("data"), f"--config {path}: data")
    out = UserWorkload(model, dm, margs, dargs)
    for kind in ("optimizer", "lr_scheduler"):
        if data.get(kind) is not None:
            setattr(out, kind, optimizer_section(data[kind], kind, f"--config {path}: {kind}"))
    return out


def resolve(workload: str | None, datamodule: str | None, init_args: str | None = None,
            data_init_args: str | None = None, config: str | None = None,
            optimizer: str | None = None, lr_scheduler: str | None = None) -> UserWorkload:
    """What to build, from the options: the config's sections, overridden key by key by the JSON
    options (--optimizer / --lr-scheduler replace the config's section whole, as LightningCLI's
    --optimizer does); --workload / --datamodule must agree with the config's class paths where both
    name one."""
    out = read_config(config) if config else UserWorkload()
    if optimizer is not None:
        out.optimizer = parse_class_option(optimizer, "optimizer", "--optimizer")
    if lr_scheduler is not None:
        out.lr_scheduler = parse_class_option(lr_scheduler, "lr_scheduler", "--lr-scheduler")
    if out.lr_scheduler is not None and out.optimizer is None:
        # LightningCLI applies a scheduler only with the optimizer it builds (else it keeps the
        # module's configure_optimizers() and the section does nothing): not measured as if it did.
        raise WorkloadConfigError("an lr_scheduler needs an optimizer: section (or --optimizer) to be built on, as "
                                  "in LightningCLI (which otherwise ignores it): add one, or drop the scheduler")
    for flag, given, attr in (("--workload", workload, "model"), ("--datamodule", datamodule, "datamodule")):
        from_config = getattr(out, attr)
        if given and from_config and given != from_config:
            raise WorkloadConfigError(f"{flag} {given} and --config's class_path {from_config} disagree: give one")
        setattr(out, attr, given or from_config)
    if init_args is not None:
        out.init_args = {**out.init_args, **parse_init_args(init_args, "--init-args")}
    if data_init_args is not None:
        out.data_init_args = {**out.data_init_args, **parse_init_args(data_init_args, "--data-init-args")}
    if out.data_init_args and not out.datamodule:
        raise WorkloadConfigError("DataModule arguments (--data-init-args, or --config's data: section) "
                                  "need a DataModule: give --datamodule or data.class_path")
    # The batch size is the probe's to set (Lightning's way); the author's value is where it starts.
    sizes = [a.pop("batch_size") for a in (out.data_init_args, out.init_args) if "batch_size" in a]
    if sizes:
        bs = sizes[0]
        if not isinstance(bs, int) or isinstance(bs, bool) or bs < 1:
            raise WorkloadConfigError(f"batch_size {bs!r} among the constructor arguments is not a positive integer")
        out.batch_size = bs
    return out
