"""The CORE paper's benchmark queries (appendices D–G) and its Figure 1, as CEQL test data.

The S/H/T sequence queries follow the appendix exactly: the event types, variable names,
filter constants and windows of every position are listed below, and :func:`stock_query`,
:func:`smart_home_query` and :func:`taxi_query` lay them out the way the appendix prints
them (three atoms per line). The n = 3 queries and Q1–Q7 are also written out literally,
with the paper's typographic quotes, as a check on the generators.
"""

from __future__ import annotations

STOCK_DECLARATION = """
CREATE STREAM S {
    EVENT BUY  { name: string, volume: int, price: double, stock_time: int },
    EVENT SELL { name: string, volume: int, price: double, stock_time: int }
}
"""

SMART_HOME_DECLARATION = """
CREATE STREAM S {
    EVENT LOAD { id: int, plug_timestamp: int, value: double, plug_id: int, household_id: int }
}
"""

TAXI_DECLARATION = """
CREATE STREAM S {
    EVENT TRIP {
        medallion: string, hack_license: string,
        pickup_datetime: int, dropoff_datetime: int,
        trip_time_in_secs: int, trip_distance: double,
        pickup_loc: string, dropoff_loc: string,
        payment_type: string, fare_amount: double, total_amount: double
    }
}
"""

# Appendix D: position k of S_n is SELL, BUY, BUY, SELL, … named T<k>, filtered by name.
STOCK_NAMES = (
    "INTC RIMM QQQ IPIX AMAT CSCO YHOO DELL ORCL MSFT INTC RIMM "
    "INTC RIMM QQQ IPIX AMAT CSCO YHOO DELL ORCL MSFT INTC RIMM"
).split()
# Appendix E: position k of H_n is LOAD named L<k>, filtered by household.
HOUSEHOLDS = [0, 2, 4, 6, 9, 10, 12, 14, 15, 4, 9, 10] * 2
# Appendix F: position k of T_n is TRIP named loc<k>, filtered by pickup and drop-off zone.
_EHN, _MW, _GS, _WB = "East Harlem North", "Midwood", "Gravesend", "West Brighton"
_LSW, _SPT, _ECV = "Lincoln Square West", "Sutton Place/Turtle Bay North", "East Concourse/Concourse Village"
TAXI_LEGS = [
    (_EHN, _MW), (_MW, _GS), (_GS, _WB), (_WB, _LSW), (_LSW, _SPT), (_SPT, _ECV),
    (_ECV, _EHN), (_EHN, _EHN), (_EHN, _GS), (_GS, _MW), (_MW, _MW), (_MW, _GS),
    (_GS, _MW), (_MW, _GS), (_GS, _WB), (_WB, _LSW), (_LSW, _SPT), (_SPT, _ECV),
    (_ECV, _EHN), (_EHN, _EHN), (_EHN, _GS), (_GS, _MW), (_MW, _MW), (_MW, _GS),
]  # fmt: skip

SIZES = (3, 6, 9, 12, 24)


def _lines(items: list[str], sep: str, per_line: int, indent: str) -> str:
    rows = [sep.join(items[k : k + per_line]) for k in range(0, len(items), per_line)]
    return (sep.rstrip() + "\n" + indent).join(rows)


def stock_query(n: int, no_output: bool = False, window: int = 10000) -> str:
    """S_n (or S_n' with ``no_output``) of appendix D, with the given window."""
    atoms = [f"{'SELL' if k % 3 == 0 else 'BUY'} as T{k + 1}" for k in range(n)]
    filters = [f"T{k + 1}[name = '{STOCK_NAMES[k]}']" for k in range(n)]
    if no_output:
        atoms.append("BUY as NE")
        filters.append("NE[name = 'NotExists']")
    return (
        "SELECT * FROM S\n"
        f"WHERE ({_lines(atoms, '; ', 3, '       ')})\n"
        f"FILTER {_lines(filters, ' AND ', 3, '       ')}\n"
        f"WITHIN {window} [stock_time]"
    )


def smart_home_query(n: int, no_output: bool = False, window: int = 10) -> str:
    """H_n (or H_n') of appendix E."""
    atoms = [f"LOAD as L{k + 1}" for k in range(n)]
    filters = ["L[value > 76]"] + [f"L{k + 1}[household_id = {HOUSEHOLDS[k]}]" for k in range(n)]
    if no_output:
        atoms.append("LOAD as NE")
        filters.append("NE[household_id = 1000]")
    return (
        "SELECT * FROM S\n"
        f"WHERE ({_lines(atoms, '; ', 3, '       ')}) as L\n"
        f"FILTER {_lines(filters, ' AND ', 3, '       ')}\n"
        f"WITHIN {window} [plug_timestamp]"
    )


def taxi_query(n: int, no_output: bool = False, window: int = 10000) -> str:
    """T_n (or T_n') of appendix F."""
    atoms = [f"TRIP as loc{k + 1}" for k in range(n)]
    filters = [
        f"loc{k + 1}[pickup_loc = '{TAXI_LEGS[k][0]}' AND dropoff_loc = '{TAXI_LEGS[k][1]}']"
        for k in range(n)
    ]
    if no_output:
        atoms.append("TRIP as NE")
        filters.append("NE[pickup_loc = 'NotExists']")
    return (
        "SELECT * FROM S\n"
        f"WHERE ({_lines(atoms, '; ', 3, '       ')})\n"
        f"FILTER {_lines(filters, ' AND ', 1, '       ')}\n"
        f"WITHIN {window} [dropoff_datetime]"
    )


def workloads() -> dict[str, tuple[str, str]]:
    """Every appendix D–F query by its paper name → (declaration, query)."""
    out: dict[str, tuple[str, str]] = {}
    for letter, decl, make, base in (
        ("S", STOCK_DECLARATION, stock_query, 10000),
        ("H", SMART_HOME_DECLARATION, smart_home_query, 10),
        ("T", TAXI_DECLARATION, taxi_query, 10000),
    ):
        for n in SIZES:
            out[f"{letter}{n}"] = (decl, make(n))
            out[f"{letter}{n}'"] = (decl, make(n, True))
        for factor in (2, 3, 4):
            out[f"{letter}3'x{factor}"] = (decl, make(3, True, base * factor))
    return out


# -- written out literally, as printed in the paper ----------------------------------------------
S3_LITERAL = """
S3 = SELECT * FROM S
     WHERE (SELL as T1; BUY as T2; BUY as T3)
     FILTER T1[name = ’INTC’] AND T2[name = ’RIMM’] AND T3[name = ’QQQ’]
     WITHIN 10000 [stock_time]
""".split("=", 1)[1]

S6_PRIME_LITERAL = """
      SELECT * FROM S
      WHERE (SELL as T1; BUY as T2; BUY as T3;
             SELL as T4; BUY as T5; BUY as T6; BUY AS NE)
      FILTER T1[name = ’INTC’] AND T2[name = ’RIMM’] AND T3[name = ’QQQ’] AND
             T4[name = ’IPIX’] AND T5[name = ’AMAT’] AND T6[name = ’CSCO’] AND NE[name = ’NotExists’]
      WITHIN 10000 [stock_time]
"""

H3_LITERAL = """
SELECT * FROM S
     WHERE (LOAD as L1; LOAD as L2; LOAD as L3) as L
     FILTER L[value > 76] AND
            L1[household_id = 0] AND L2[household_id = 2] AND L3[household_id = 4]
     WITHIN 10 [plug_timestamp]
"""

T3_LITERAL = """
SELECT * FROM S
     WHERE (TRIP as loc1; TRIP as loc2; TRIP as loc3)
     FILTER loc1[pickup_loc = ’East Harlem North’ and dropoff_loc = ’Midwood’] AND
            loc2[pickup_loc = ’Midwood’ AND dropoff_loc = ’Gravesend’] AND
            loc3[pickup_loc = ’Gravesend’ AND dropoff_loc = ’West Brighton’]
     WITHIN 10000 [dropoff_datetime]
"""

# Appendix G.
OTHER_OPERATORS = {
    "Q1": """
SELECT * FROM S
     WHERE (SELL as msft; BUY as oracle; BUY as csco; SELL as amat)
     FILTER msft[name = ’MSFT’] AND oracle[name = ’ORCL’] AND
            csco[name = ’CSCO’] AND amat[name = ’AMAT’]
     WITHIN 30000 [stock_time]
""",
    "Q2": """
SELECT * FROM S
     WHERE (SELL as msft; BUY as oracle; BUY as csco; SELL as amat)
     FILTER msft[name = ’MSFT’] AND msft[price > 26.0] AND
            oracle[name = ’ORCL’] AND oracle[price > 11.14] AND
            csco[name = ’CSCO’] AND amat[name = ’AMAT’] AND amat[price >= 18.92]
     WITHIN 30000 [stock_time]
""",
    "Q3": """
SELECT * FROM S
     WHERE (SELL as msft; BUY as oracle; BUY as csco; SELL as amat)
     FILTER msft[name = ’MSFT’] AND oracle[name = ’ORCL’] AND
            csco[name = ’CSCO’] AND amat[name = ’AMAT’]
     PARTITION BY [volume]
     WITHIN 30000 [stock_time]
     CONSUME BY ANY
""",
    "Q4": """
SELECT * FROM S
     WHERE (SELL as msft; (BUY OR SELL) as oracle; (BUY OR SELL) as csco; SELL as amat)
     FILTER msft[name = ’MSFT’] AND oracle[name = ’ORCL’] AND
            csco[name = ’CSCO’] AND amat[name = ’AMAT’]
     WITHIN 30000 [stock_time]
""",
    "Q5": """
SELECT * FROM S
     WHERE (SELL as msft; (BUY OR SELL) as oracle; (BUY OR SELL) as csco; SELL as amat)
     FILTER msft[name = ’MSFT’] AND msft[price > 26.0] AND
            oracle[name = ’ORCL’] AND oracle[price > 11.14] AND
            csco[name = ’CSCO’] AND amat[name = ’AMAT’] AND amat[price >= 18.92]
     WITHIN 30000 [stock_time]
""",
    "Q6": """
SELECT * FROM S
     WHERE (SELL as msft; (BUY OR SELL) as oracle; (BUY OR SELL) as csco; SELL as amat)
     FILTER msft[name = ’MSFT’] AND oracle[name = ’ORCL’] AND
            csco[name = ’CSCO’] AND amat[name = ’AMAT’]
     PARTITION BY [volume]
     WITHIN 30000 [stock_time]
     CONSUME BY ANY
""",
    "Q7": """
SELECT * FROM S
     WHERE (SELL as msft; (BUY OR SELL)+ as qqq; SELL as amat)
     FILTER msft[name = ’MSFT’] AND qqq[name = ’QQQ’] and
            qqq[volume=4000] AND amat[name = ’AMAT’]
     WITHIN 30000 [stock_time]
""",
}

# Figure 1 (stream "Stock"; Q2 has a time window in minutes; Q3 as printed has a typo).
FIGURE_1 = {
    "Q1": """SELECT * FROM Stock
WHERE SELL as msft; SELL as intel; SELL as amzn
FILTER msft[name="MSFT"] AND msft[price > 100]
   AND intel[name="INTC"]
   AND amzn[name="AMZN"] AND amzn[price < 2000]""",
    "Q2": """SELECT b FROM Stock
WHERE (BUY or SELL) as s;
      (BUY or SELL) as b
PARTITION BY [name], [volume]
WITHIN 1 minute""",
    "Q3": """SELECT MAX * FROM Stock
WHERE (BUY OR SELL) as low; (BUY OR SELL)+ as mid; (BUY OR SELL) as high
FILTER low[price < 100] AND mid[price >= 100]
   AND mid[price <= 2000] AND high[price > 2000]
PARTITION BY [name]""",
}
FIGURE_1_Q3_AS_PRINTED = FIGURE_1["Q3"].replace("(BUY OR SELL) as high", "(BUY OR SELL as) high")
