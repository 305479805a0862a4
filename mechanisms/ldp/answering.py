"""Answering SQL over a local table's reports: the registry of protocols the engine answers.

A table of local-DP reports names its protocol (`client.PROTOCOLS`) and ε; its size parameters
come from the declared columns (D, the number of cells, or d, the number of binary columns),
the rest (`branching`, `oracle`, `order`) are the table's protocol options. `LOCAL_PROTOCOLS`
maps each answerable protocol to the payload columns its tally reads (`tally.Payload`) and the
family whose unbiased estimator and exact covariances answer every block:

- support oracles over the whole domain (`oracle_answers`): `rr`, `grr`, `oue`, `sue`, `olh`,
  and `inprr`/`inpps` (SUE/GRR over the 2^d records);
- a head list's two-level GRR (`head_list_answers`): `grr2`, over one key column (its released keys
  and ⋆: GRR over the head list) or two (query and URL: every query's URLs are the second column's);
- sampled-strata protocols (`stratified_answers`): ranges `hrr`, `hh`, `haar`
  (`range_answers`) and marginals `inpht`, `margrr`, `margps`, `marght` (`marginal_answers`).

Adding a protocol is one entry. `inpem` is not answerable (no unbiased estimator or variance).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

from mechanisms.domain import Domain
from mechanisms.ldp.client import PROTOCOLS, Protocol
from mechanisms.ldp.head_list_answers import head_list_answers
from mechanisms.ldp.marginal_answers import inpht_answers, sampled_marginal_answers
from mechanisms.ldp.oracle_answers import FrequencyOracleAnswers
from mechanisms.ldp.range_answers import haar_answers, hh_answers, hrr_answers
from mechanisms.ldp.tally import Payload, ReportTally

__all__ = ["FrequencyOracleAnswers", "LocalProtocol", "LOCAL_PROTOCOLS", "MAX_DENSE_CELLS", "client_protocol", "local_answers",
           "payload_of", "protocol_options"]


def _oracle(domain: Domain, protocol: Protocol, tally: ReportTally) -> FrequencyOracleAnswers:
    support = tally.dense(0, domain.size())[0]
    pairs = tally.co_support(domain.size()) if protocol.name == "olh" else None
    return FrequencyOracleAnswers(domain, protocol.name, protocol.epsilon, support, tally.reports, pairs)


@dataclass(frozen=True)
class LocalProtocol:
    """An answerable protocol: its payload (or a function of its client object) and its answering family."""

    payload: Payload | Callable[[Protocol], Payload]
    answers: Callable[[Domain, Protocol, ReportTally], Any]
    dense: bool = True  # its estimator keeps a cells × cells matrix (covariances): at most MAX_DENSE_CELLS cells


MAX_DENSE_CELLS = 4096  # a 4096 × 4096 float64 matrix is 128 MiB


_SIGNED = Payload(item="index", sign="bit")
LOCAL_PROTOCOLS: dict[str, LocalProtocol] = {
    "rr": LocalProtocol(Payload(item="bit"), _oracle, dense=False),
    "grr": LocalProtocol(Payload(item="value"), _oracle, dense=False),
    "oue": LocalProtocol(Payload(items="ones"), _oracle, dense=False),
    "sue": LocalProtocol(Payload(items="ones"), _oracle, dense=False),
    "olh": LocalProtocol(Payload(hashed=True), _oracle),
    "inprr": LocalProtocol(Payload(items="ones"), _oracle, dense=False),
    "inpps": LocalProtocol(Payload(item="value"), _oracle, dense=False),
    "hrr": LocalProtocol(_SIGNED, hrr_answers),
    "hh": LocalProtocol(lambda p: Payload(stratum="level", items="ones") if p.oracle == "oue"
                        else Payload(stratum="level", item="index", sign="bit"), hh_answers),
    "haar": LocalProtocol(Payload(stratum="level", item="index", sign="bit"), haar_answers),
    "inpht": LocalProtocol(_SIGNED, inpht_answers),
    "margrr": LocalProtocol(Payload(stratum="marginal", items="ones"), sampled_marginal_answers),
    "margps": LocalProtocol(Payload(stratum="marginal", item="value"), sampled_marginal_answers),
    "marght": LocalProtocol(Payload(stratum="marginal", item="index", sign="bit"), sampled_marginal_answers),
    "grr2": LocalProtocol(Payload(item="value"), head_list_answers),
}
_SIZES = ("epsilon", "domain", "attributes", "urls")  # derived from the table, never options


def protocol_options(protocol: str) -> tuple[str, ...]:
    """The options a table may set for `protocol` (its client's parameters beyond ε and the sizes)."""
    return tuple(f.name for f in dataclasses.fields(PROTOCOLS[protocol]) if f.name not in _SIZES)


def client_protocol(protocol: str, epsilon: float, domain: Domain, options: dict | None = None) -> Protocol:
    """The client object a table's reports were made with (ValueError: the table cannot hold them)."""
    if protocol not in LOCAL_PROTOCOLS:
        raise ValueError(f"protocol {protocol!r} is not answerable in SQL; one of {', '.join(LOCAL_PROTOCOLS)}")
    cls, options = PROTOCOLS[protocol], dict(options or {})
    unknown = set(options) - set(protocol_options(protocol))
    if unknown:
        allowed = ", ".join(protocol_options(protocol)) or "none"
        raise ValueError(f"{protocol} takes no option {', '.join(sorted(unknown))} (its options: {allowed})")
    fields = {f.name for f in dataclasses.fields(cls)}
    if "domain" in fields:
        options["domain"] = domain.size()
    if "attributes" in fields or protocol in ("inprr", "inpps"):
        if any(size != 2 for size in domain.sizes):
            raise ValueError(f"{protocol} reports records of binary attributes: every column needs exactly 2 cells")
        options["attributes"] = len(domain.sizes)
    if protocol == "grr2":
        if len(domain.sizes) > 2:
            raise ValueError("grr2 reports a record of a head list: one column (the query) or two (query, URL)")
        options["urls"] = (domain.sizes[1] if len(domain.sizes) == 2 else 1,) * domain.sizes[0]
    if LOCAL_PROTOCOLS[protocol].dense and domain.size() > MAX_DENSE_CELLS:
        raise ValueError(f"{protocol}'s estimator keeps a cells × cells matrix: at most {MAX_DENSE_CELLS} cells, not "
                         f"{domain.size()} (declare coarser columns, or use a frequency oracle: grr, oue, sue)")
    made = cls(epsilon=epsilon, **options)
    if made.values != domain.size():
        raise ValueError(f"{protocol} reports {made.values} values; the columns have {domain.size()} cells")
    return made


def payload_of(protocol: Protocol) -> Payload:
    """The payload columns a protocol's reports are tallied from."""
    payload = LOCAL_PROTOCOLS[protocol.name].payload
    return payload(protocol) if callable(payload) else payload


def local_answers(domain: Domain, protocol: Protocol, tally: ReportTally):
    """The answering model of a local table's reports (unbiased answers, exact variances, `covariance`)."""
    return LOCAL_PROTOCOLS[protocol.name].answers(domain, protocol, tally)
