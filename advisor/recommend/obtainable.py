"""Can the account get each candidate: what the catalog knows (types AWS sells mostly by Capacity
Block or reservation) and, when asked, what the account's quotas and spot placement scores say
(advisor/ec2/account.py)."""

from __future__ import annotations

from dataclasses import replace

from catalog.models import Catalog

from .rows import CandidateRow, Rows


def with_account_facts(rows: Rows, catalog: Catalog, *, check: bool, only: bool,
                       top: int) -> tuple[Rows, list[str]]:
    """(rows with the facts filled, the warnings said on the way). `check` asks AWS (credentials
    needed); `only` keeps the `top` candidates the account can get, renumbered."""
    warnings: list[str] = []
    cands = [replace(r, sold_by_reservation=catalog.instance_types[r.instance_type].sold_by_reservation)
             for r in rows.candidates]
    if check:
        from ..ec2.account import Account, Need
        from ..ec2.account import check as check_account

        def need(r: CandidateRow) -> Need:
            it = catalog.instance_types[r.instance_type]
            # spot+od-fallback starts on spot: its first request is what must be obtainable
            return Need(r.instance_type, r.region, "on-demand" if r.market == "on-demand" else "spot", r.count,
                        it.vcpus, it.sold_by_reservation)

        account = Account()
        needs = [need(r) for r in cands]
        verdicts = check_account(needs, account)
        warnings += account.warnings
        cands = [replace(r, obtainable=(v := verdicts[n]).obtainable, obtainable_reason=v.reason)
                 for r, n in zip(cands, needs)]
        if only:
            kept = [r for r in cands if r.obtainable == "yes"][:top]
            if not kept:
                warnings.append(f"--obtainable-only: none of the {len(cands)} best candidates is obtainable by this "
                                "account; without --obtainable-only the note column says why")
            cands = [replace(r, rank=n + 1) if r.rank is not None else r for n, r in enumerate(kept)]
    return replace(rows, candidates=cands), warnings
