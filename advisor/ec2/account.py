"""Can this account get it? Per candidate (instance type, region, market, count): the running
vCPU quota of its class (Service Quotas) and, for spot, EC2's spot placement score.

Used by `advisor recommend --check-account` (an `obtainable` yes/no/unknown per candidate, with
the reason) and by `advisor launch` (a type whose quota cannot hold it is refused before any
instance starts). What AWS answers is cached for an hour in the cache dir, per credentials.
Access denied, throttling or any other refusal of one API is a warning and `unknown` for what
that API would have told, never a failure of the whole command; missing credentials or an
endpoint that cannot be reached are (one line).

boto3 is imported inside functions only (see advisor/ec2/__init__.py).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel

from catalog.aws import call
from catalog.models import RESERVATION_NOTE
from safeio import read_json_file

from ..errors import AdvisorError
from ..paths import cache_dir
from . import aws
from .quotas import Quota, find, quota_class

CACHE_SECONDS = 3600
IAM_ACTIONS = ("servicequotas:ListServiceQuotas", "servicequotas:GetServiceQuota", "ec2:GetSpotPlacementScores")
# AWS scores 1 to 10 and says only that 10 is "highly likely" and 1 "not likely" to succeed;
# where yes and no begin is our reading of that scale, not an AWS figure.
SCORE_YES = 7
SCORE_NO = 3
# "We recommend that you specify at least three instance types. If you specify one or two
# instance types ... the returned placement score will always be low." (GetSpotPlacementScores)
MIN_SCORED_TYPES = 3
MAX_REGIONS_PER_CALL = 10  # the API's limit on RegionNames


@dataclass(frozen=True)
class Need:
    """One candidate: `count` instances of `instance_type` in `region`, on `market`."""

    instance_type: str
    region: str
    market: str  # "on-demand" | "spot"
    count: int
    vcpus: int  # per instance
    sold_by_reservation: bool = False

    @property
    def total_vcpus(self) -> int:
        return self.vcpus * self.count


@dataclass(frozen=True)
class Verdict:
    obtainable: str  # "yes" | "no" | "unknown"
    reason: str
    quota: Quota | None = None  # the quota that says no, for launch's refusal line


# ---------------------------------------------------------------- the cache


class _Listing(BaseModel):
    at: float
    quotas: dict[str, tuple[str, float]]  # code -> (name, vCPUs)


class _Scores(BaseModel):
    at: float
    scores: dict[str, int]  # region -> score


class _CacheFile(BaseModel):
    version: int = 1
    quotas: dict[str, _Listing] = {}  # region ->
    scores: dict[str, _Scores] = {}  # "count|types|regions" ->


def _credentials_key(purpose: str = "--check-account") -> str:
    """A stable, non-secret name for the credentials in use: what one account sees is not
    another's. A hash of the access key id; no credentials -> a one-line error."""
    import boto3

    try:
        creds = boto3.session.Session().get_credentials()
    except call.errors() as e:
        raise aws.user_error(e, purpose) from None
    if creds is None:
        raise AdvisorError(f"{purpose}: no AWS credentials found (set AWS_PROFILE or run 'aws configure'"
                        f"{'; or leave --check-account out to rank offline' if purpose == '--check-account' else ''})")
    return hashlib.sha256(creds.get_frozen_credentials().access_key.encode()).hexdigest()[:16]


def _credentials_problem(e: BaseException) -> bool:
    from botocore.exceptions import (
        CredentialRetrievalError,
        NoCredentialsError,
        PartialCredentialsError,
        ProfileNotFound,
        TokenRetrievalError,
    )

    return isinstance(e, (NoCredentialsError, PartialCredentialsError, ProfileNotFound, CredentialRetrievalError,
                          TokenRetrievalError)) or aws.error_code(e) in ("InvalidClientTokenId", "UnrecognizedClientException",
                                                                          "ExpiredToken", "ExpiredTokenException", "AuthFailure")


# ---------------------------------------------------------------- asking AWS


@dataclass
class Account:
    """Quotas and spot placement scores as one set of credentials sees them."""

    client: Callable[..., object] | None = None  # (service, region) -> boto3 client; None: aws.client
    cache_path: Path | None = None  # None: cache_dir()/account-<credentials>.json
    cache_seconds: float = CACHE_SECONDS  # 0: ask AWS again (launch), still writing the answers
    purpose: str = "--check-account"  # what the messages say is asking
    now: Callable[[], float] = time.time
    warnings: list[str] = field(default_factory=list)
    _cache: _CacheFile | None = None
    _dirty: bool = False
    _failed: set[tuple[str, str]] = field(default_factory=set)  # (api, region) that refused

    def _client(self, service: str, region: str):
        return (self.client or aws.client)(service, region)

    def _load(self) -> _CacheFile:
        if self._cache is None:
            if self.cache_path is None:
                self.cache_path = cache_dir() / f"account-{_credentials_key(self.purpose)}.json"
            try:
                self._cache = _CacheFile.model_validate(read_json_file(self.cache_path, "account-check cache", 16 * 2**20))
            except ValueError:  # FileError and ValidationError are ValueErrors; parse_json bounds nesting
                self._cache = _CacheFile()  # none yet, or unreadable: asked again, rewritten
        return self._cache

    def save(self) -> None:
        """Write what was asked (atomically); a cache that cannot be written is a warning."""
        if not self._dirty or self._cache is None or self.cache_path is None:
            return
        from safeio import FileError, save_atomic

        try:
            save_atomic(self._cache, self.cache_path)
            self._dirty = False
        except FileError as e:  # "cannot write PATH: why"
            self.warnings.append(f"cannot write the account-check cache ({e})")

    def __post_init__(self):
        self._started = self.now()

    def _fresh(self, at: float) -> bool:
        """Asked by this Account, or cached less than cache_seconds ago."""
        return at >= self._started or 0 <= self.now() - at < self.cache_seconds

    def _refused(self, api: str, region: str, e: BaseException) -> None:
        """One API failed: warn once, and what it would tell is unknown. Missing or broken
        credentials end the command (nothing else would work either); an endpoint that cannot be
        reached or does not answer like AWS stops that API everywhere, not region by region."""
        from botocore.exceptions import ClientError

        if _credentials_problem(e):
            raise aws.user_error(e, self.purpose) from None
        # AWS's own refusal (denied, throttled) is about this region; anything else (no answer,
        # no AWS answer, a bare HTTP status) is about the endpoint
        where = region if isinstance(e, ClientError) and not aws.error_code(e).isdigit() else "*"
        if (api, where) in self._failed:
            return
        self._failed.add((api, where))
        hint = f"{self.purpose} needs IAM permissions {', '.join(IAM_ACTIONS)}"
        self.warnings.append(call.explain(e, f"{api} in {region}", denied_hint=hint)
                             + "; what it would tell is unknown")

    def _gave_up(self, api: str, region: str) -> bool:
        return (api, region) in self._failed or (api, "*") in self._failed

    def quota(self, region: str, quota: Quota) -> float | None:
        """The quota's value in vCPUs, or None when it cannot be read (a warning says why)."""
        cache = self._load()
        listing = cache.quotas.get(region)
        if listing is None or not self._fresh(listing.at):
            listing = self._list_quotas(region)
            if listing is None:
                return None
        found = find(listing.quotas, quota)
        if found is None:
            value = self._get_quota(region, quota)
            if value is None:
                return None
            listing.quotas[quota.code] = (quota.name, value)
            self._dirty = True
            return value
        return found[1]

    def _list_quotas(self, region: str) -> _Listing | None:
        if self._gave_up("servicequotas:ListServiceQuotas", region):
            return None
        try:
            sq = self._client("service-quotas", region)
            quotas = {}
            for page in sq.get_paginator("list_service_quotas").paginate(ServiceCode="ec2"):
                for q in page.get("Quotas", []):
                    if q.get("QuotaCode") and isinstance(q.get("Value"), (int, float)):
                        quotas[q["QuotaCode"]] = (str(q.get("QuotaName", "")), float(q["Value"]))
        except call.errors() as e:
            self._refused("servicequotas:ListServiceQuotas", region, e)
            return None
        listing = self._load().quotas[region] = _Listing(at=self.now(), quotas=quotas)
        self._dirty = True
        return listing

    def _get_quota(self, region: str, quota: Quota) -> float | None:
        """A quota the listing left out (it lists applied values; some quotas have only a default)."""
        api = "servicequotas:GetServiceQuota"
        if self._gave_up(api, region):
            return None
        sq = self._client("service-quotas", region)
        for get in (sq.get_service_quota, sq.get_aws_default_service_quota):
            try:
                value = get(ServiceCode="ec2", QuotaCode=quota.code)["Quota"].get("Value")
                return float(value) if isinstance(value, (int, float)) else None
            except call.errors() as e:
                if aws.error_code(e) == "NoSuchResourceException":
                    continue
                self._refused(api, region, e)
                return None
        return None

    def spot_scores(self, count: int, types: Iterable[str], regions: Iterable[str]) -> dict[str, int]:
        """Region -> spot placement score (1-10) for `count` instances drawn from `types`; regions
        AWS did not score are absent."""
        types, regions = sorted(set(types)), sorted(set(regions))
        out: dict[str, int] = {}
        for i in range(0, len(regions), MAX_REGIONS_PER_CALL):
            chunk = regions[i:i + MAX_REGIONS_PER_CALL]
            key = f"{count}|{','.join(types)}|{','.join(chunk)}"
            cached = self._load().scores.get(key)
            if cached is not None and self._fresh(cached.at):
                out.update(cached.scores)
                continue
            api = "ec2:GetSpotPlacementScores"
            if self._gave_up(api, chunk[0]):
                continue
            try:
                ec2 = self._client("ec2", chunk[0])
                scores: dict[str, int] = {}
                pages = ec2.get_paginator("get_spot_placement_scores").paginate(
                    InstanceTypes=types, TargetCapacity=count, TargetCapacityUnitType="units",
                    SingleAvailabilityZone=False, RegionNames=chunk)
                for page in pages:
                    for s in page.get("SpotPlacementScores", []):
                        if s.get("Region") in chunk and isinstance(s.get("Score"), int):
                            scores[s["Region"]] = s["Score"]
            except call.errors() as e:
                self._refused(api, chunk[0], e)
                continue
            self._load().scores[key] = _Scores(at=self.now(), scores=scores)
            self._dirty = True
            out.update(scores)
        return out


# ---------------------------------------------------------------- verdicts


def _quota_part(account: Account, need: Need) -> tuple[str, str, Quota | None]:
    qc = quota_class(need.instance_type)
    if qc is None:
        return "unknown", f"no EC2 vCPU quota class known for {need.instance_type}", None
    quota = qc.quota(need.market)
    if quota is None:
        return "no", f"{qc.key} instances cannot run as spot", None
    value = account.quota(need.region, quota)
    label = f"{'spot ' if need.market == 'spot' else ''}quota"
    if value is None:
        return "unknown", f"{label} for {qc.key} instances in {need.region} unknown", None
    text = f"{label} {value:g} vCPU for {qc.key} instances in {need.region} (needs {need.total_vcpus})"
    return ("yes", text, None) if value >= need.total_vcpus else ("no", text, quota)


def _score_part(score: int | None, need: Need, scored_types: int) -> tuple[str, str]:
    if score is None:
        return "unknown", f"no spot placement score for {need.region}"
    text = f"spot placement score {score}/10 in {need.region}"
    if scored_types < MIN_SCORED_TYPES:
        text += f" (from {scored_types} type{'s' if scored_types > 1 else ''}: AWS scores fewer than {MIN_SCORED_TYPES} low)"
        return ("yes" if score >= SCORE_YES else "unknown"), text
    if score >= SCORE_YES:
        return "yes", text
    return ("no" if score <= SCORE_NO else "unknown"), text


def check(needs: Iterable[Need], account: Account | None = None) -> dict[Need, Verdict]:
    """A verdict per need: no when any check says no, yes when every check says yes."""
    account = account or Account()
    needs = list(dict.fromkeys(needs))
    # one score request per count: the spot candidates' types together, every region they are in
    by_count: dict[int, list[Need]] = {}
    for n in needs:
        if n.market == "spot":
            by_count.setdefault(n.count, []).append(n)
    scores = {c: account.spot_scores(c, (n.instance_type for n in ns), (n.region for n in ns))
              for c, ns in by_count.items()}
    types_scored = {c: len({n.instance_type for n in ns}) for c, ns in by_count.items()}
    out: dict[Need, Verdict] = {}
    for n in needs:
        parts = [_quota_part(account, n)]
        if n.market == "spot":
            parts.append((*_score_part(scores[n.count].get(n.region), n, types_scored[n.count]), None))
        elif n.sold_by_reservation and parts[0][0] == "yes":
            parts.append(("unknown", RESERVATION_NOTE, None))
        states = [p[0] for p in parts]
        verdict = "no" if "no" in states else "yes" if all(s == "yes" for s in states) else "unknown"
        out[n] = Verdict(verdict, "; ".join(p[1] for p in parts), next((p[2] for p in parts if p[2]), None))
    account.save()
    return out


def launch_refusals(region: str, market: str, vcpus: dict[str, int],
                    account: Account | None = None) -> dict[str, str]:
    """Instance type -> one line, for the types of a launch whose quota cannot hold them. The
    launch starts one instance of each type at once, so the types of one class share its quota:
    they are taken in the order given while they fit. Unreadable quotas refuse nothing (the
    account's warnings say why). Asked afresh, not from the cache: a quota raised minutes ago
    must count."""
    account = account or Account(cache_seconds=0)
    refused: dict[str, str] = {}
    groups: dict[Quota, list[str]] = {}
    for t in vcpus:
        qc = quota_class(t)
        if qc is None:
            continue
        quota = qc.quota(market)
        if quota is None:
            refused[t] = f"{qc.key} instances cannot run as spot; launch it with --market on-demand"
            continue
        groups.setdefault(quota, []).append(t)
    for quota, types in groups.items():
        value = account.quota(region, quota)
        if value is None:
            continue
        used = 0
        for t in types:
            if used + vcpus[t] <= value:
                used += vcpus[t]
                continue
            beside = f" beside the {used} of the types before it" if used else ""
            refused[t] = (f"the quota '{quota.name}' ({quota.code}) is {value:g} vCPUs in {region}, and it needs "
                          f"{vcpus[t]}{beside}; {quota.how_to_raise(region, used + vcpus[t])}")
    account.save()
    return refused
