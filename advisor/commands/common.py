"""Options and loaders shared by several commands: the catalog, the store, and list options."""

from __future__ import annotations

import argparse
import os
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

from pydantic import AwareDatetime, BaseModel

from catalog.filters import ARCHS, TypeFilter
from catalog.io import load
from catalog.models import Catalog
from safeio import FileError, read_json_file, save_atomic

from .. import options as opt
from ..errors import AdvisorError
from ..output import warn
from ..paths import cache_dir, catalog_file, default_store_path

DEFAULT_MAX_AGE_DAYS = 30.0
MAX_AGE_ENV = "INSTANCE_ADVISOR_MAX_AGE"
# The age warning is said once per this long per catalog; the stamp lives in the cache dir.
AGE_WARNING_EVERY = timedelta(days=1)
AGE_STAMP_NAME = "age-warnings.json"


def command_name() -> str:
    """How to run `advisor` again, for the commands a command prints (as an argument list, quoted
    where it is printed as a shell line): as it was run (`.venv/bin/advisor` from a venv that is
    not activated), else plain `advisor`."""
    me = sys.argv[0] if sys.argv else ""
    return me if os.path.basename(me) == "advisor" else "advisor"


# ---------------------------------------------------------------------------------------------
# List options: one spelling and one grammar in every command

class ListAction(argparse.Action):
    """`--family g5,g6 --family P4D` -> ['g5', 'g6', 'p4d']: a comma list, repeated, or both;
    each item trimmed, normalised (lower case unless told otherwise), duplicates dropped (unless
    `unique=False`: the command refuses them itself), and checked against `choices` when given."""

    def __init__(self, option_strings, dest, *, normalise=str.lower, item_choices=None, unique=True, **kw):
        self.normalise = normalise
        self.item_choices = item_choices
        self.unique = unique
        super().__init__(option_strings, dest, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        items = list(getattr(namespace, self.dest, None) or [])  # never the shared default
        new = [x.strip() for v in (values if isinstance(values, list) else [values]) for x in v.split(",")]
        new = [self.normalise(x) for x in new if x]
        for x in new:  # the one rule for text from the command line (UTF-8, no control characters)
            try:
                opt.check_text(x)
            except AdvisorError as e:
                parser.error(f"argument {option_string}: {e}")
        if not new:
            parser.error(f"argument {option_string}: give at least one value (a comma list, or repeat the option)")
        if self.item_choices is not None:
            bad = [x for x in new if x not in self.item_choices]
            if bad:
                parser.error(f"argument {option_string}: unknown {', '.join(bad)}: choose from {', '.join(self.item_choices)}")
        items.extend(x for x in new if not (self.unique and x in items))
        setattr(namespace, self.dest, items)


def add_list_option(parser, name: str, *, metavar: str, help: str,  # noqa: A002 - argparse's own keyword
                    aliases: tuple[str, ...] = (),
                    normalise=str.lower, choices=None, unique: bool = True) -> None:
    """A list option (`--region R[,R...]`, repeatable). `aliases` are old spellings kept working
    but not shown in --help; an alias ending in 's' also takes space-separated values, as the
    old plural options did (`--regions us-east-1 us-west-2`)."""
    dest = name.lstrip("-").replace("-", "_")
    parser.add_argument(name, action=ListAction, default=[], metavar=f"{metavar}[,{metavar}...]",
                        help=f"{help} (a comma list, or repeat the option)", dest=dest,
                        normalise=normalise, item_choices=choices, unique=unique)
    for alias in aliases:
        parser.add_argument(alias, action=ListAction, dest=dest, default=argparse.SUPPRESS,
                            nargs="+" if alias.endswith("s") else None, help=argparse.SUPPRESS,
                            normalise=normalise, item_choices=choices, unique=unique)


def one_region(text: str) -> str:
    """argparse type of the --region that names where AWS calls go (launch, its status and cancel,
    results pull): the same spelling as the list options, one value."""
    region = text.strip().lower()
    if "," in region or not region:
        raise argparse.ArgumentTypeError(f"give one region (this command works in one at a time), got {text!r}")
    return region


def add_type_filter_options(parser) -> None:
    """The instance-type filters of `catalog show` and `recommend` (catalog/filters.py is the rule)."""
    add_list_option(parser, "--family", metavar="F", help="only these instance families, e.g. g6e,p4d")
    add_list_option(parser, "--accelerator", metavar="NAME", normalise=str.strip,
                    help="only instance types with this accelerator: a device name as the catalog has it "
                         "(A10G, 'NVIDIA L40S', A100, Trainium2) or a kind (gpu, neuron, gaudi, none)")
    parser.add_argument("--arch", choices=ARCHS, help="only this CPU architecture")
    parser.add_argument("--min-gpus", type=opt.whole(0, 1024), default=0, metavar="N",
                        help="only instance types with at least N accelerator devices (GPUs, Neuron or Gaudi devices)")


def type_filter(args) -> TypeFilter:
    if args.min_gpus < 0:
        raise AdvisorError(f"--min-gpus must be 0 or more, got {args.min_gpus}")
    return TypeFilter(families=tuple(args.family), accelerators=tuple(args.accelerator),
                      arch=args.arch, min_gpus=args.min_gpus)


# ---------------------------------------------------------------------------------------------
# The catalog

def add_catalog_options(parser) -> None:
    parser.add_argument("--catalog", type=opt.path, metavar="FILE",
                        help="catalog file to read (default: the refreshed cache, else the shipped snapshot)")
    parser.add_argument("--max-age", type=opt.days, default=None, metavar="DAYS",
                        help=f"warn (once a day) when the catalog is older than this (default: ${MAX_AGE_ENV}, "
                             f"else {DEFAULT_MAX_AGE_DAYS:g})")


def max_age_days(args) -> float:
    """--max-age, else $INSTANCE_ADVISOR_MAX_AGE, else the default."""
    if getattr(args, "max_age", None) is not None:
        return args.max_age
    if text := os.environ.get(MAX_AGE_ENV, "").strip():
        return opt.parse_days(text, f"${MAX_AGE_ENV}")
    return DEFAULT_MAX_AGE_DAYS


def catalog_path(args) -> Path:
    """--catalog FILE, else the cache written by 'catalog refresh', else the shipped snapshot."""
    path, note = catalog_file(getattr(args, "catalog", None))
    if note:
        warn(note)
    return path


def load_catalog(args) -> Catalog:
    """The catalog catalog_path picks, with its age said once a day when it is older than --max-age."""
    max_age = max_age_days(args)  # a bad $INSTANCE_ADVISOR_MAX_AGE is said before any work
    path = catalog_path(args)
    cat = load(path)
    age_days = (datetime.now(timezone.utc) - cat.fetched_at).total_seconds() / 86400
    if age_days > max_age and _first_warning_today(path, cat):
        warn(
            f"catalog ({cat.source}, fetched {cat.fetched_at:%Y-%m-%d}) is {age_days:.0f} days old; "
            "prices change: run 'advisor catalog refresh' with AWS credentials "
            f"(said once a day; --max-age or ${MAX_AGE_ENV} sets the limit)"
        )
    return cat


class _AgeStamps(BaseModel):
    said: dict[str, AwareDatetime] = {}  # catalog -> when its age warning was last said


def _first_warning_today(path: Path, cat: Catalog, now: datetime | None = None) -> bool:
    """True when this catalog's age warning was not said in the last day, and stamps it as said.
    The stamp is a small JSON file in the cache dir, replaced atomically; when it cannot be read
    or written (a read-only cache dir), the warning is said every time rather than never."""
    now = now or datetime.now(timezone.utc)
    stamp = cache_dir() / AGE_STAMP_NAME
    key = f"{path.resolve()}@{cat.fetched_at.isoformat()}"  # a refreshed catalog is another catalog
    try:
        said = _AgeStamps.model_validate(read_json_file(stamp, "age-warning stamps", 2**20)).said
    except ValueError:  # none yet, or unreadable (FileError, ValidationError): start afresh
        said = {}
    last = said.get(key)
    if last is not None and timedelta(0) <= now - last < AGE_WARNING_EVERY:
        return False
    said = {k: v for k, v in said.items() if now - v < 2 * AGE_WARNING_EVERY}  # forget old catalogs
    said[key] = now
    try:
        save_atomic(_AgeStamps(said=said), stamp)
    except (OSError, FileError):  # a read-only cache dir, a full disk: the warning is said every time
        pass
    return True


# ---------------------------------------------------------------------------------------------
# The results store

def add_store_option(parser) -> None:
    parser.add_argument("--store", type=opt.path, metavar="DB", help="results store (SQLite; default: the XDG data dir)")


def store_path(args) -> Path:
    return Path(args.store) if getattr(args, "store", None) else default_store_path()


def open_store(args, create: bool = True):
    """The store to write to (probe, import, pull; delete with create=False): created, with its
    folder, if missing."""
    from ..store import ResultStore

    return ResultStore(store_path(args), create=create)


def store_to_read(args) -> Path | None:
    """The store to read; None when nothing was ever stored in the default place. A store named
    with --store or INSTANCE_ADVISOR_STORE must exist: a mistyped path is an error (when it is
    opened), not an empty store."""
    path = store_path(args)
    if not getattr(args, "store", None) and not os.environ.get("INSTANCE_ADVISOR_STORE") and not path.exists():
        return None
    return path


def read_store(args):
    """The store to read (store_to_read), opened read-only; None when there is none."""
    from ..store import ResultStore

    path = store_to_read(args)
    return None if path is None else ResultStore(path, readonly=True)


# ---------------------------------------------------------------------------------------------
# A user's own workload: its constructor arguments (probe and recommend share them: they are part
# of the workload's id)

def add_user_workload_options(group) -> None:
    group.add_argument("--init-args", metavar="JSON",
                       help="your LightningModule's constructor arguments as a JSON object, e.g. '{\"d_model\": 512}'")
    group.add_argument("--data-init-args", metavar="JSON", help="your DataModule's constructor arguments (JSON object)")
    group.add_argument("--config", type=opt.path, metavar="FILE.yaml",
                       help="a LightningCLI config (model:, data:, optimizer: and lr_scheduler: sections with "
                            "class_path and init_args); --workload, --datamodule and the options here override it")
    group.add_argument("--optimizer", metavar="CLASS|JSON",
                       help="train with this optimizer instead of your module's configure_optimizers(), as "
                            "LightningCLI's optimizer: does: a class (AdamW, torch.optim.AdamW) or "
                            "'{\"class_path\": \"AdamW\", \"init_args\": {\"lr\": 0.001}}'")
    group.add_argument("--lr-scheduler", metavar="CLASS|JSON",
                       help="with --optimizer (or the config's): its learning-rate scheduler, as LightningCLI's "
                            "lr_scheduler: (StepLR, or JSON with class_path and init_args)")


def user_workload(args, default_model: str):
    """The module, DataModule and their arguments from --workload, --datamodule, --init-args,
    --data-init-args, --config, --optimizer and --lr-scheduler (lightning_module/contract/workload_config.py)."""
    from lightning_module.contract.result import BUILTIN_MODELS
    from lightning_module.contract.workload_config import UserWorkload, WorkloadConfigError, resolve

    if not (args.init_args or args.data_init_args or args.config or args.optimizer or args.lr_scheduler):
        u = UserWorkload(model=args.workload or default_model, datamodule=args.datamodule)
    else:
        try:
            u = resolve(args.workload, args.datamodule, args.init_args, args.data_init_args, args.config,
                        args.optimizer, args.lr_scheduler)
        except WorkloadConfigError as e:
            raise AdvisorError(str(e)) from None
        if u.model is None:
            raise AdvisorError("--config has no model.class_path: name your LightningModule with --workload package.module:Class")
    if u.model not in BUILTIN_MODELS:
        # Your module's own defaults stand unless you say otherwise: an explicit --image-size or
        # --num-classes is a constructor argument (the probe refuses it where the constructor has none).
        for name in ("image_size", "num_classes"):
            if getattr(args, name, None) is not None:
                u.init_args.setdefault(name, getattr(args, name))
    return u
