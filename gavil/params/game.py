"""The ``game`` params section: the collection game (``gavil game``, docs/game.md).

Only ``store_dir`` and ``gold`` change a stage's outputs (``import_annotations`` reads the store in
``store_dir``, and ``dvc.yaml`` depends on the folder; ``gold`` decides whose answers count); every
other key is a runtime knob of the game server.
"""

from __future__ import annotations

import ipaddress
from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, Field, field_validator

from gavil.params.base import Fraction, PosInt, Section, runtime_field


def _rate_limit(v: str) -> str:
    """``v`` if it parses as one or more rate limits (``limits`` notation, each amount >= 1)."""
    from limits import parse_many

    try:
        parsed = parse_many(v)
    except ValueError:
        parsed = []
    if not parsed or any(lim.amount < 1 for lim in parsed):
        raise ValueError(f"{v!r} is not a rate limit such as '20/minute' or '20/minute; 100/hour' (amounts >= 1)")
    return v


RateLimit = Annotated[str, AfterValidator(_rate_limit)]


class BonusTier(Section):
    """A bonus for an association whose fool-the-AI score is at least ``min_fool`` (0-100)."""

    min_fool: Annotated[int, Field(ge=0, le=100)]
    amount: Annotated[float, Field(ge=0)]


class GoldParams(Section):
    """Solver checks with gold items (docs/dynamic.md "Solver checks (gold items)").

    A gold item is a published instance (``selection`` status ``selected``) whose every candidate has
    an accepted image. With ``enabled``, a new solver is served ``items`` gold items first, through
    the same solve endpoints as any association; a solver whose mean Jaccard over their gold answers
    is below ``min_jaccard`` (a fraction, like ``select.min_solver_jaccard``) is not counted: the
    game's answers they give are kept in ``annotation_rejects`` with reason ``failed_gold_check``.

    ``min_jaccard`` 0.5: the paper screened annotators with qualification tests (§2.2) but gives no
    number. 0.5 sits above a random guess's expected Jaccard for most shapes (0.14 for N=10, K=2;
    0.30 for N=5, K=2; 0.46 for N=5, K=3) and well below the 0.8 every published instance's
    solvers reached, so a careful player passes and a clicker does not.
    """

    enabled: bool = False
    items: PosInt = 3  # gold items a new solver answers before their answers count
    min_jaccard: Fraction = 0.5  # fraction 0-1: lowest mean Jaccard over a solver's gold answers that passes
    # gold answers below min_jaccard, after the first `items`, that fail a solver who had passed
    strikes: PosInt = 2
    # fraction 0-1 of a checked solver's later tasks that are gold items (drawn per solver and task)
    rate: Fraction = runtime_field(0.2)


class FlagParams(Section):
    """Players' reports (flags) and their weight (docs/dynamic.md "Flags and review").

    A report takes an association out of serving at once until an admin reviews it, but holds an
    unpublished instance out of a release only with weight: with ``game.gold.enabled``, one report by
    a solver who passed the gold check; with it off, ``min_reporters`` distinct reporters. A report
    never takes a published instance out: only the admin's ``retire`` does.
    """

    min_reporters: PosInt = 3  # distinct reporters that hold an unpublished instance while gold checks are off
    # reports one account may make per collection round (a round's creations and gold items alike)
    reports_per_round: PosInt = runtime_field(10)


class GameParams(Section):
    MODEL_REFS: ClassVar[dict[str, str | None]] = {"rival_model": "open_clip"}

    # the folder of the game's SQLite store (game.sqlite, with its WAL files): a DVC dependency of
    # import_annotations, so `dvc repro` folds new game data in
    store_dir: str = "data/game"
    # solver checks: new solvers answer gold items (published instances) first; import_annotations
    # excludes the game answers of a solver who failed them (docs/dynamic.md)
    gold: GoldParams = GoldParams()
    # players' reports: what holds an instance out of a release, and each account's budget
    flags: FlagParams = FlagParams()
    # the consent text players accept before any work (UTF-8 text, shown as plain text; its sha256
    # is the version each acceptance records; a changed file asks every player again; docs/review.md)
    consent_path: str = runtime_field("data/sample/consent.md")
    host: str = runtime_field("127.0.0.1")
    port: Annotated[int, Field(ge=0, le=65535)] = runtime_field(8765)
    # who may join: "invitation" (default): each person joins with their own single-use code that
    # the operator issued (POST /api/admin/invitations); "shared_code": anyone with the one code in
    # $join_code_env joins, as often as they like (only for a trusted lab)
    identity: Literal["invitation", "shared_code"] = runtime_field("invitation")
    join_code_env: str = runtime_field("GAVIL_GAME_JOIN_CODE")  # the shared code (identity: shared_code)
    admin_token_env: str = runtime_field("GAVIL_GAME_ADMIN_TOKEN")  # pause, export, raw submissions
    # the models entry of the game's rival (open_clip); the benchmark's rival is score.model
    rival_model: str = runtime_field("rival")
    # true: the rival with random weights (labelled untrained everywhere)
    rival_random_weights: bool = runtime_field(False)
    submissions_per_minute: PosInt = runtime_field(30)  # per session token and per account; more are refused (HTTP 429)
    # throttles checked before any work (HTTP 429 + Retry-After), moving windows in `limits` notation:
    join_limit_per_address: RateLimit = runtime_field("30/minute; 100/hour")  # POST /api/join per client address
    join_limit_per_code: RateLimit = runtime_field("60/minute")  # POST /api/join per join code sent (right or wrong)
    submission_limit_per_address: RateLimit = runtime_field("120/minute")  # creates + solves per client address
    # requests with no or an unknown session token, per client address: their own budget, so an
    # unauthenticated flood never uses up an authenticated player's
    unauthenticated_limit_per_address: RateLimit = runtime_field("60/minute")
    # reads and work requests of one account (dashboard, leaderboard, rival polls, task requests)
    read_limit_per_account: RateLimit = runtime_field("300/minute")
    # admin-token attempts, right or wrong, checked before the token is compared
    admin_limit_per_address: RateLimit = runtime_field("10/minute; 50/hour")
    admin_limit_global: RateLimit = runtime_field("30/minute; 300/hour")
    # seconds a refused admin token waits before its answer, one refusal at a time across the server
    admin_failure_delay_s: Annotated[float, Field(ge=0, le=60)] = runtime_field(1.0)
    # reverse proxies (IP addresses or CIDR networks) trusted to name the client in X-Forwarded-For;
    # empty (default): forwarded headers are ignored and the client is the TCP peer
    trusted_proxies: list[str] = runtime_field([])
    # true: the swow_af variant's instances (data/adversarial/swow_af.parquet, status ok, every image
    # accepted) are served as solve tasks too; their solves are imported and selection decides (>= 80 %)
    serve_af_variant: bool = runtime_field(False)
    # seconds a served solve task stays reserved for its player; an answer after it is refused
    lease_s: PosInt = runtime_field(600)
    # admission control: API requests one server process serves at once; one more is refused at once
    # with HTTP 503 + Retry-After (busy_retry_after_s, seconds) instead of queueing (docs/game.md "Load")
    max_in_flight: PosInt = runtime_field(48)
    # server processes of `gavil game` on one store (uvicorn workers); the throttles' windows are
    # shared through <store>.limits.sqlite, admission control (max_in_flight) is per process
    workers: Annotated[int, Field(ge=1, le=64)] = runtime_field(1)
    busy_retry_after_s: Annotated[int, Field(ge=1, le=600)] = runtime_field(2)
    # the store's PRAGMA synchronous: "full" (a commit is on disk before the answer) or "normal" (it
    # survives the server being killed, not a power cut or an OS crash)
    synchronous: Literal["full", "normal"] = runtime_field("full")
    # bonus schedule (paper §2.2, Appendix A.4.1): none unless solvable-by-humans >= bonus_min_solvable
    # and fool-the-AI >= the lowest tier; the highest tier reached pays. Amounts are in bonus_unit.
    bonus_min_solvable: Annotated[float, Field(ge=0, le=1)] = runtime_field(0.8)
    bonus_unit: str = runtime_field("points")
    bonus_tiers: list[BonusTier] = runtime_field(
        [
            BonusTier(min_fool=50, amount=1),
            BonusTier(min_fool=60, amount=2),
            BonusTier(min_fool=67, amount=3),
            BonusTier(min_fool=80, amount=4),
        ]
    )

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, v: list[str]) -> list[str]:
        for net in v:
            try:
                ipaddress.ip_network(net, strict=False)
            except ValueError:
                raise ValueError(
                    f"{net!r} is not an IP address or CIDR network such as 10.0.0.5 or 10.0.0.0/24"
                ) from None
        return v

    @field_validator("bonus_tiers")
    @classmethod
    def _ascending(cls, v: list[BonusTier]) -> list[BonusTier]:
        lows = [t.min_fool for t in v]
        if lows != sorted(set(lows)):
            raise ValueError("tiers must be in ascending, distinct min_fool order")
        return v
