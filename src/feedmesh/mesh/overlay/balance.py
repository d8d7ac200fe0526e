"""Pairwise bandwidth balance (paper 4.4, after Ngan et al.'s incentives-compatible multicast).

A node that takes part in several groups is a parent in some and a child in others, so between
two cooperative nodes the records flow both ways. Each node keeps, per neighbour, what it sent it
(items, bytes) and what it got from it, over every group. A neighbour that keeps taking more than
it gives is the freeloader the paper means: "a bandwidth imbalance is detected, and service may be
denied". Pure bookkeeping, no clock: the caller says when it judges.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Balance", "Ledger"]


@dataclass(slots=True)
class Balance:
    """What flowed between this node and one neighbour, each way."""

    items_to: int = 0
    bytes_to: int = 0
    items_from: int = 0
    bytes_from: int = 0
    strikes: int = 0       # consecutive judgements found below the threshold
    judged_to: int = 0     # bytes_to at the last judgement
    judged_from: int = 0   # bytes_from at the last judgement

    @property
    def ratio(self) -> float:
        """Bytes received per byte sent (infinite when nothing was sent)."""
        return self.bytes_from / self.bytes_to if self.bytes_to else float("inf")


class Ledger:
    """Per-neighbour balances; ``judge`` says whether a neighbour has stayed below the threshold.

    A neighbour is judged only while we sent it more than ``allowance`` bytes beyond what it sent
    us (a newcomer gets that much on credit); it fails a judgement when, since the last one, it
    gave back less than ``min_ratio`` of what it got (so a debt run up before it could repay does
    not sink a neighbour that now pays its way), and is found out after ``strikes`` failures in a
    row.
    """

    def __init__(self, *, min_ratio: float, allowance: int, strikes: int) -> None:
        self.min_ratio = min_ratio
        self.allowance = allowance
        self.strikes = strikes
        self.balances: dict[int, Balance] = {}

    def sent(self, node: int, size: int) -> None:
        balance = self._of(node)
        balance.items_to += 1
        balance.bytes_to += size

    def received(self, node: int, size: int) -> None:
        balance = self._of(node)
        balance.items_from += 1
        balance.bytes_from += size

    def in_debt(self, node: int) -> bool:
        """It took more than the allowance beyond what it gave (a repayment is due)."""
        balance = self.balances.get(node)
        return balance is not None and balance.bytes_to - balance.bytes_from > self.allowance

    def judge(self, node: int) -> bool:
        """One judgement; True when ``node`` has now stayed below the threshold ``strikes`` times
        in a row (its balance is then forgotten: the caller drops it)."""
        balance = self.balances.get(node)
        if balance is None:
            return False
        given = balance.bytes_to - balance.judged_to
        got = balance.bytes_from - balance.judged_from
        balance.judged_to, balance.judged_from = balance.bytes_to, balance.bytes_from
        if not self.in_debt(node) or (given and got >= self.min_ratio * given):
            balance.strikes = 0
            return False
        if not given:
            return False   # nothing went its way since: no evidence either way
        balance.strikes += 1
        if balance.strikes < self.strikes:
            return False
        del self.balances[node]
        return True

    def _of(self, node: int) -> Balance:
        balance = self.balances.get(node)
        if balance is None:
            balance = self.balances[node] = Balance()
        return balance
