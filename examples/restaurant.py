"""The restaurant from the Kafka versioned-store article, on verstore.

Two cases where an out-of-order update must not be treated as the newest one:

1. Bills: orders are joined with the curry price valid *at the order's time*. The price is $8
   from t=0 and $10 from t=4; Candace's order at t=3 arrives after the price change, and is
   still charged $8 a curry.
2. Votes: a tally of each customer's latest vote. Anna's vote at t=3 arrives after her vote at
   t=4; put() reports it as out of order (it returns a valid-to instead of VALID_TO_UNDEFINED),
   so the tally does not change.

Run: `make run` (or `python examples/restaurant.py` once verstore is installed).
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

import verstore


def bills(directory: Path) -> None:
    print("== bills: orders joined with the price valid at the order's time ==")
    events: list[tuple[str, ...]] = [
        ("price", "curry", "8", "0"),
        ("order", "Anna", "curry", "2", "1"),
        ("price", "curry", "10", "4"),
        ("order", "Bob", "curry", "1", "5"),
        ("order", "Candace", "curry", "3", "3"),  # out of order: placed before the price change
    ]
    with verstore.VersionedStore(directory / "prices", history_retention_ms=60_000) as prices:
        for event in events:
            if event[0] == "price":
                _, item, price, ts = event
                prices.put(item.encode(), price.encode(), int(ts))
                print(f"price update: {item} costs ${price} from t={ts}")
            else:
                _, customer, item, quantity, ts = event
                record = prices.get(item.encode(), as_of=int(ts))
                assert record is not None, f"no price for {item} at t={ts}"
                price = int(record.value)
                total = price * int(quantity)
                print(
                    f"bill: {customer} ordered {quantity} x {item} at t={ts}: "
                    f"{quantity} x ${price} = ${total}"
                )


def votes() -> None:
    print("== votes: a tally of each customer's latest vote ==")
    ballots = [
        ("Anna", "mint pizza", 1),
        ("Bob", "mint pizza", 2),
        ("Anna", "berry sandwich", 4),
        ("Anna", "ice cream noodles", 3),  # out of order: cast before her t=4 vote
    ]
    latest_votes = verstore.VersionedStore.in_memory(history_retention_ms=60_000)
    tally: Counter[str] = Counter()
    for customer, item, ts in ballots:
        previous = latest_votes.get(customer.encode())
        code = latest_votes.put(customer.encode(), item.encode(), ts)
        if code == verstore.VALID_TO_UNDEFINED:
            if previous is not None:
                tally[previous.value.decode()] -= 1
            tally[item] += 1
            outcome = "counted"
        elif code == verstore.NOT_PUT:
            outcome = "dropped: older than the grace period"
        else:
            outcome = f"out of order (superseded at t={code}): tally unchanged"
        print(f"vote: {customer} for {item} at t={ts}: {outcome}")
    standings = ", ".join(f"{item}={n}" for item, n in sorted(tally.items()) if n)
    print(f"tally: {standings}")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="verstore-restaurant-") as tmp:
        bills(Path(tmp))
    votes()


if __name__ == "__main__":
    main()
