# ruff: noqa: E501  (data: long literal lines read better unbroken)
"""Scripted trajectories for the development set: one domain per entry, written for stopwise (own work, Apache-2.0).

Each domain is a task (goal, acceptance criteria), the on-goal steps that solve it in order, and pools of steps
that do something else: related, partly related, tangential and unrelated (for drift), errors that last
(permission, not found, unsupported) and that pass (timeouts), a job that is polled, a list that is paged, and
final answers that are complete, partial or claimed without evidence. ``build_devset.py`` turns them into
labelled states. A step is ``(agent text, tool, args, result)``; a result starting with ``ERROR:`` is a failed call.

The split is by domain: the test domains are written separately from the train domains and share no steps, so
test figures measure how the signals carry to tasks they were not tuned on.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from _domain import Domain, check

_FIRST: tuple[Domain, ...] = (
    # ---------------------------------------------------------------- train domains
    Domain(
        name="travel_booking",
        split="train",
        goal="Book a round-trip flight from Paris to Lisbon, leaving May 3 and returning May 7, under 300 EUR, "
        "and email the itinerary to the traveller.",
        criteria=(
            "a round-trip flight Paris-Lisbon booked for May 3 to May 7",
            "total price under 300 EUR",
            "itinerary emailed to the traveller",
        ),
        steps=(
            ("Searching round-trip flights Paris to Lisbon, May 3 to May 7.", "search_flights",
             {"origin": "CDG", "destination": "LIS", "depart": "2025-05-03", "return": "2025-05-07"},
             "3 itineraries: TP433/TP438 189 EUR; AF1024/AF1025 262 EUR; U27611/U27612 141 EUR (no bags)"),
            ("TP433/TP438 at 189 EUR includes a bag and fits the budget; checking the fare rules.", "get_fare_rules",
             {"offer": "TP433-TP438"}, "Fare Discount Classic: 1 checked bag, change fee 60 EUR, total 189.00 EUR"),
            ("Booking the round trip TP433/TP438 for the traveller.", "book_flight",
             {"offer": "TP433-TP438", "passenger": "Claire Martin"},
             "Booking confirmed. PNR X7K2LQ. Paris CDG-Lisbon LIS May 3, Lisbon-Paris May 7. Total 189.00 EUR."),
            ("Emailing the itinerary with the PNR to the traveller.", "send_email",
             {"to": "claire.martin@example.com", "subject": "Your Lisbon trip, PNR X7K2LQ"},
             "Email sent to claire.martin@example.com (message id 5521) with the itinerary attached."),
        ),
        final_good="Booked round trip TP433/TP438 Paris-Lisbon, May 3 to May 7, total 189 EUR (under 300 EUR), "
        "PNR X7K2LQ; the itinerary was emailed to the traveller.",
        final_partial="I found TP433/TP438 Paris-Lisbon for 189 EUR but have not booked it yet; the booking and the "
        "itinerary email still need to be done.",
        final_claim="Everything is taken care of, the trip is all set.",
        related=(
            ("Checking the traveller's passport details needed for the booking.", "get_traveller_profile",
             {"name": "Claire Martin"}, "Claire Martin, passport FR 18AB22391, valid until 2031, frequent flyer TP 88123"),
            ("Adding the frequent flyer number to the Lisbon reservation.", "update_booking",
             {"pnr": "X7K2LQ", "ffn": "TP 88123"}, "Frequent flyer number added to PNR X7K2LQ."),
        ),
        partly=(
            ("Looking at hotels in Lisbon for May 3 to May 7 in case the traveller needs one.", "search_hotels",
             {"city": "Lisbon", "checkin": "2025-05-03", "checkout": "2025-05-07"},
             "12 hotels: Hotel Avenida 95 EUR/night, Casa Alfama 120 EUR/night, ..."),
            ("Checking airport transfer options from Lisbon airport.", "search_transfers",
             {"from": "LIS", "to": "city centre"}, "Metro red line 1.80 EUR, taxi about 20 EUR, shuttle 8 EUR"),
        ),
        tangential=(
            ("Reading about the history of the Lisbon tram network.", "web_search", {"query": "Lisbon tram 28 history"},
             "Tram 28 has run since 1914 through Graca, Baixa and Estrela; the Remodelado cars date from the 1930s."),
            ("Looking up the weather in Paris next week.", "get_weather", {"city": "Paris"},
             "Paris: light rain Monday, 14C; sunny Thursday, 19C."),
        ),
        unrelated=(
            ("Checking the latest football scores.", "web_search", {"query": "champions league results"},
             "Semi-final first legs: 2-1 and 0-0."),
            ("Summarising a recipe for banana bread.", "fetch_url", {"url": "https://recipes.example/banana-bread"},
             "Mash 3 ripe bananas, mix with 250 g flour, 100 g sugar, bake 60 minutes at 175C."),
        ),
        lasting={
            "permission": ("Booking the round trip TP433/TP438.", "book_flight", {"offer": "TP433-TP438"},
                           "ERROR: 403 Forbidden: this API key is not allowed to create bookings (scope read:offers)"),
            "not_found": ("Fetching the fare rules for the offer.", "get_fare_rules", {"offer": "TP433-TP438"},
                          "ERROR: offer TP433-TP438 not found"),
            "unsupported": ("Booking the round trip.", "book_flight", {"offer": "TP433-TP438"},
                            "ERROR: round-trip bookings are not supported by this connector (one-way only)"),
        },
        transient=("Searching flights again.", "search_flights", {"origin": "CDG", "destination": "LIS"},
                   "ERROR: upstream timeout after 30 s, please retry"),
        poll=("Checking whether the ticket has been issued.", "get_booking_status", {"pnr": "X7K2LQ"},
              ("status: PENDING (ticketing in progress)", "status: PENDING (ticketing in progress)",
               "status: TICKETED, e-ticket 047-2233445566")),
        page=("Reading more flight offers.", "search_flights", {"origin": "CDG", "destination": "LIS"},
              ("page 1: TP433 189 EUR; AF1024 262 EUR", "page 2: U27611 141 EUR; VY8461 176 EUR",
               "page 3: FR2044 129 EUR (no bag); IB3402 240 EUR")),
        cannot="The booking API does not let me create bookings with this key, so I cannot book the flight.",
        risk_tools={"search_flights": "read_only", "book_flight": "regulated", "send_email": "irreversible",
                    "update_booking": "reversible", "cancel_booking": "irreversible"},
    ),
    Domain(
        name="code_repair",
        split="train",
        goal="Fix the failing test test_parse_dates in the billing repository and open a pull request with the fix.",
        criteria=(
            "test_parse_dates passes",
            "the full test suite passes",
            "a pull request with the fix is open",
        ),
        steps=(
            ("Running the failing test to see the error.", "run_tests", {"path": "tests/test_dates.py::test_parse_dates"},
             "FAILED tests/test_dates.py::test_parse_dates - ValueError: time data '2024-02-30' does not match format"),
            ("Reading billing/dates.py where parse_dates is defined.", "read_file", {"path": "billing/dates.py"},
             "def parse_dates(rows):\n    return [datetime.strptime(r['date'], '%Y-%m-%d') for r in rows]"),
            ("parse_dates must skip invalid dates; editing billing/dates.py.", "edit_file",
             {"path": "billing/dates.py", "patch": "wrap strptime in try/except ValueError and skip the row"},
             "Edited billing/dates.py: 1 hunk, +5 -1 lines."),
            ("Running test_parse_dates and the full test suite.", "run_tests", {"path": "tests"},
             "142 passed in 8.3s, including tests/test_dates.py::test_parse_dates"),
            ("Opening a pull request with the fix.", "create_pull_request",
             {"branch": "fix/parse-dates", "title": "Skip invalid dates in parse_dates"},
             "Pull request #418 opened: Skip invalid dates in parse_dates (fix/parse-dates -> main)."),
        ),
        final_good="Fixed parse_dates in billing/dates.py to skip invalid dates; test_parse_dates passes and the "
        "full suite passes (142 passed); pull request #418 is open with the fix.",
        final_partial="I edited billing/dates.py; I still need to run the full test suite and open the pull request.",
        final_claim="The bug is fixed and everything works now.",
        related=(
            ("Checking git blame for when parse_dates changed.", "git_log", {"path": "billing/dates.py"},
             "a91c2e3 2024-03-02 'parse dates strictly' by dana"),
            ("Looking at the test fixture rows used by test_parse_dates.", "read_file",
             {"path": "tests/fixtures/dates.csv"}, "date,amount\n2024-02-28,10\n2024-02-30,5\n2024-03-01,7"),
        ),
        partly=(
            ("Running the linter on the billing package.", "run_command", {"cmd": "ruff check billing"},
             "billing/invoice.py:12:1: F401 'os' imported but unused"),
            ("Reading the CONTRIBUTING guide for the pull request template.", "read_file", {"path": "CONTRIBUTING.md"},
             "PR titles use the imperative mood; link the issue; CI must pass."),
        ),
        tangential=(
            ("Upgrading the pandas dependency to the latest version.", "run_command", {"cmd": "pip install -U pandas"},
             "Successfully installed pandas-2.2.2"),
            ("Reading about Python datetime internals.", "web_search", {"query": "how does python datetime store timezone"},
             "datetime objects hold an optional tzinfo; naive datetimes have none."),
        ),
        unrelated=(
            ("Refactoring the README's badges section.", "edit_file", {"path": "README.md", "patch": "reorder badges"},
             "Edited README.md: 1 hunk, +3 -3 lines."),
            ("Looking up a good mechanical keyboard.", "web_search", {"query": "best mechanical keyboard 2024"},
             "Top picks: Keychron Q1, Leopold FC900R, ..."),
        ),
        lasting={
            "permission": ("Pushing the fix branch.", "git_push", {"branch": "fix/parse-dates"},
                           "ERROR: remote: Permission to acme/billing.git denied to bot-account. fatal: 403"),
            "not_found": ("Reading billing/dates.py.", "read_file", {"path": "billing/dates.py"},
                          "ERROR: No such file or directory: 'billing/dates.py'"),
            "unsupported": ("Opening a pull request.", "create_pull_request", {"branch": "fix/parse-dates"},
                            "ERROR: pull requests are not supported for this repository host (read-only mirror)"),
        },
        transient=("Running the test suite.", "run_tests", {"path": "tests"},
                   "ERROR: runner connection reset, retrying in 10 s may help"),
        poll=("Checking the CI status of the pull request.", "get_ci_status", {"pr": 418},
              ("CI: running (2/5 jobs done)", "CI: running (2/5 jobs done)", "CI: passed (5/5 jobs)")),
        page=("Reading the rest of the test log.", "read_log", {"job": "tests"},
              ("lines 1-200: collecting 142 items ...", "lines 201-400: tests/test_invoice.py ........",
               "lines 401-520: tests/test_dates.py F ...")),
        cannot="The repository is a read-only mirror and I cannot push or open a pull request here.",
        risk_tools={"read_file": "read_only", "edit_file": "reversible", "git_push": "irreversible",
                    "create_pull_request": "reversible", "delete_branch": "irreversible"},
    ),
    Domain(
        name="data_analysis",
        split="train",
        goal="Compute monthly revenue by region for 2023 from the sales warehouse and produce a chart and a short "
        "summary of the top region.",
        criteria=(
            "monthly revenue by region for 2023 computed",
            "a chart of monthly revenue by region saved",
            "a summary naming the top region",
        ),
        steps=(
            ("Listing the tables in the sales warehouse.", "list_tables", {"schema": "sales"},
             "sales.orders, sales.regions, sales.customers, sales.refunds"),
            ("Querying monthly revenue by region for 2023.", "run_sql",
             {"query": "SELECT region, month, sum(amount) FROM sales.orders WHERE year = 2023 GROUP BY 1, 2"},
             "48 rows: EMEA 2023-01 412k, NA 2023-01 530k, APAC 2023-01 208k, ... NA 2023-12 711k"),
            ("Plotting monthly revenue by region.", "make_chart",
             {"kind": "line", "x": "month", "y": "revenue", "series": "region"},
             "Chart saved to charts/revenue_by_region_2023.png"),
            ("Computing yearly totals to find the top region.", "run_sql",
             {"query": "SELECT region, sum(amount) FROM sales.orders WHERE year = 2023 GROUP BY 1 ORDER BY 2 DESC"},
             "NA 7.4M, EMEA 5.9M, APAC 2.8M"),
        ),
        final_good="Monthly revenue by region for 2023 is computed (48 rows); the chart is saved to "
        "charts/revenue_by_region_2023.png; the top region is NA with 7.4M, ahead of EMEA 5.9M and APAC 2.8M.",
        final_partial="I computed monthly revenue by region for 2023; the chart and the top-region summary are "
        "still to do.",
        final_claim="Analysis complete. Let me know if you need anything else.",
        related=(
            ("Checking whether refunds should be subtracted from revenue.", "run_sql",
             {"query": "SELECT count(*), sum(amount) FROM sales.refunds WHERE year = 2023"}, "1,204 refunds, 310k"),
            ("Checking the region codes used in the orders table.", "run_sql",
             {"query": "SELECT DISTINCT region FROM sales.orders"}, "NA, EMEA, APAC"),
        ),
        partly=(
            ("Looking at the customer count per region.", "run_sql",
             {"query": "SELECT region, count(*) FROM sales.customers GROUP BY 1"}, "NA 12,400; EMEA 9,800; APAC 4,100"),
            ("Checking the data dictionary for the orders table.", "read_doc", {"name": "orders"},
             "orders.amount is net of tax, in USD; orders.region is the billing region."),
        ),
        tangential=(
            ("Exploring the 2019 revenue figures out of curiosity.", "run_sql",
             {"query": "SELECT sum(amount) FROM sales.orders WHERE year = 2019"}, "11.2M"),
            ("Reading about chart colour palettes.", "web_search", {"query": "colour blind friendly palettes"},
             "Okabe-Ito and viridis are common colour-blind safe palettes."),
        ),
        unrelated=(
            ("Checking the office cafeteria menu.", "fetch_url", {"url": "https://intranet.example/menu"},
             "Monday: lentil soup; Tuesday: grilled salmon."),
            ("Reading the news about a volcano eruption.", "web_search", {"query": "volcano eruption news"},
             "The eruption in Iceland continued for a third day."),
        ),
        lasting={
            "permission": ("Querying monthly revenue by region.", "run_sql", {"query": "SELECT ... FROM sales.orders"},
                           "ERROR: permission denied for table orders (role analyst_ro lacks SELECT on sales)"),
            "not_found": ("Querying the orders table.", "run_sql", {"query": "SELECT ... FROM sales.orders_2023"},
                          "ERROR: relation \"sales.orders_2023\" does not exist"),
            "unsupported": ("Saving the chart.", "make_chart", {"kind": "line"},
                            "ERROR: chart rendering is not supported in this sandbox (no display backend)"),
        },
        transient=("Querying the warehouse.", "run_sql", {"query": "SELECT region, month, sum(amount) ..."},
                   "ERROR: warehouse overloaded, query timed out after 60 s; try again later"),
        poll=("Checking whether the export job finished.", "get_job", {"job": "exp-7731"},
              ("job exp-7731: RUNNING 40%", "job exp-7731: RUNNING 40%", "job exp-7731: DONE, 48 rows")),
        page=("Fetching the next batch of query results.", "fetch_rows", {"cursor": "c-19"},
              ("rows 1-16: EMEA 2023-01 412k ...", "rows 17-32: NA 2023-05 601k ...", "rows 33-48: APAC 2023-09 230k ...")),
        cannot="I do not have access to the sales tables, so it is not possible to compute the revenue.",
        risk_tools={"run_sql": "read_only", "make_chart": "reversible", "drop_table": "irreversible",
                    "export_customers": "regulated"},
    ),
    Domain(
        name="customer_support",
        split="train",
        goal="Resolve ticket #8823: the customer was charged twice for order 5591; refund the duplicate charge and "
        "reply to the customer.",
        criteria=(
            "the duplicate charge on order 5591 is confirmed",
            "the duplicate charge is refunded",
            "the customer received a reply about the refund",
        ),
        steps=(
            ("Reading ticket #8823.", "get_ticket", {"id": 8823},
             "Ticket #8823 from j.ortiz@example.com: 'I was charged twice for order 5591, 49.90 each.'"),
            ("Looking up the payments for order 5591.", "list_payments", {"order": 5591},
             "2 captures for order 5591: ch_1A 49.90 (09:14), ch_1B 49.90 (09:14) - same card"),
            ("ch_1B is the duplicate charge; refunding it.", "refund_payment", {"charge": "ch_1B", "amount": 49.90},
             "Refund re_77 created for ch_1B, 49.90, status succeeded."),
            ("Replying to the customer about the refund.", "reply_ticket",
             {"id": 8823, "body": "We refunded the duplicate charge of 49.90 (refund re_77)."},
             "Reply posted to ticket #8823; the customer was notified by email."),
        ),
        final_good="Confirmed the duplicate charge ch_1B on order 5591, refunded 49.90 (refund re_77, succeeded) and "
        "replied to the customer on ticket #8823.",
        final_partial="I confirmed the duplicate charge on order 5591; the refund and the reply are still pending.",
        final_claim="Ticket resolved, the customer should be happy now.",
        related=(
            ("Checking the customer's account for other duplicate charges.", "list_payments",
             {"customer": "j.ortiz@example.com"}, "5 payments in 90 days; only order 5591 has two captures"),
            ("Checking the refund policy for duplicate charges.", "read_doc", {"name": "refund-policy"},
             "Duplicate charges are refunded in full without approval up to 500."),
        ),
        partly=(
            ("Looking at the shipping status of order 5591.", "get_order", {"id": 5591},
             "Order 5591: shipped May 2, delivered May 4."),
            ("Tagging the ticket with the billing category.", "tag_ticket", {"id": 8823, "tag": "billing"},
             "Tag billing added to ticket #8823."),
        ),
        tangential=(
            ("Reviewing the customer's past product reviews.", "list_reviews", {"customer": "j.ortiz@example.com"},
             "2 reviews: 4 stars (kettle), 5 stars (teapot)."),
            ("Reading other open tickets in the queue.", "list_tickets", {"status": "open"},
             "#8824 password reset; #8825 delivery delay; #8826 invoice copy"),
        ),
        unrelated=(
            ("Drafting a blog post about spring tea blends.", "create_draft", {"title": "Spring tea blends"},
             "Draft 'Spring tea blends' saved."),
            ("Checking the stock price of a competitor.", "web_search", {"query": "competitor stock price"},
             "Shares rose 2% on Tuesday."),
        ),
        lasting={
            "permission": ("Refunding the duplicate charge ch_1B.", "refund_payment", {"charge": "ch_1B"},
                           "ERROR: insufficient permissions: refunds require the billing_admin role"),
            "not_found": ("Looking up the payments for order 5591.", "list_payments", {"order": 5591},
                          "ERROR: order 5591 not found"),
            "unsupported": ("Refunding the charge.", "refund_payment", {"charge": "ch_1B"},
                            "ERROR: partial and full refunds are not supported for this payment method (bank transfer)"),
        },
        transient=("Refunding ch_1B.", "refund_payment", {"charge": "ch_1B"},
                   "ERROR: 503 service unavailable, the payment provider is temporarily down"),
        poll=("Checking the refund status.", "get_refund", {"id": "re_77"},
              ("refund re_77: pending", "refund re_77: pending", "refund re_77: succeeded")),
        page=("Reading older messages on the ticket.", "list_ticket_messages", {"id": 8823},
              ("messages 1-5: customer reports double charge ...", "messages 6-10: agent asked for receipt ...",
               "messages 11-12: customer sent bank statement ...")),
        cannot="I am not allowed to issue refunds with my role, so I cannot resolve this ticket myself.",
        risk_tools={"get_ticket": "read_only", "refund_payment": "regulated", "reply_ticket": "irreversible",
                    "tag_ticket": "reversible", "close_account": "irreversible"},
    ),
    Domain(
        name="research",
        split="train",
        goal="Write a one-paragraph literature summary on the effect of intermittent fasting on blood pressure, "
        "citing at least three peer-reviewed studies.",
        criteria=(
            "at least three peer-reviewed studies on intermittent fasting and blood pressure found",
            "a one-paragraph summary written",
            "the summary cites the studies",
        ),
        steps=(
            ("Searching for studies on intermittent fasting and blood pressure.", "search_papers",
             {"query": "intermittent fasting blood pressure randomized trial"},
             "Found: Smith 2021 (Hypertension) RCT n=120; Lee 2022 (JAMA Netw Open) n=90; Rossi 2020 meta-analysis"),
            ("Reading the abstract of Smith 2021.", "get_abstract", {"id": "smith2021"},
             "Smith 2021: 12 weeks of 16:8 fasting lowered systolic blood pressure by 4.1 mmHg versus control."),
            ("Reading the abstract of Lee 2022 and the Rossi 2020 meta-analysis.", "get_abstract",
             {"id": "lee2022,rossi2020"},
             "Lee 2022: no significant change in blood pressure; Rossi 2020: pooled systolic reduction 3.2 mmHg (11 trials)."),
            ("Writing the one-paragraph summary with citations.", "write_file",
             {"path": "summary.md"}, "Wrote summary.md (1 paragraph, 162 words, 3 citations)."),
        ),
        final_good="summary.md holds a one-paragraph summary: intermittent fasting modestly lowers systolic blood "
        "pressure (Smith 2021: -4.1 mmHg; Rossi 2020 meta-analysis: -3.2 mmHg), though Lee 2022 found no change; "
        "three peer-reviewed studies cited.",
        final_partial="I found three studies on intermittent fasting and blood pressure but have not written the "
        "summary yet.",
        final_claim="Here is the summary you wanted; the research is done.",
        related=(
            ("Checking that Smith 2021 is peer-reviewed.", "get_journal_info", {"journal": "Hypertension"},
             "Hypertension: peer-reviewed journal of the American Heart Association."),
            ("Formatting the citations in APA style.", "format_citations", {"ids": ["smith2021", "lee2022"]},
             "Smith, J. (2021). Hypertension, 78(2)... Lee, K. (2022). JAMA Netw Open..."),
        ),
        partly=(
            ("Looking for studies on fasting and cholesterol too.", "search_papers",
             {"query": "intermittent fasting cholesterol"}, "Found: Park 2019 (LDL -7%), Chen 2020"),
            ("Reading a review of diet and hypertension in general.", "get_abstract", {"id": "review2018"},
             "The DASH diet lowers blood pressure; sodium reduction adds further benefit."),
        ),
        tangential=(
            ("Reading about the history of fasting in religious traditions.", "web_search",
             {"query": "history of fasting religions"}, "Fasting appears in Ramadan, Lent, Yom Kippur ..."),
            ("Looking up celebrity fasting routines.", "web_search", {"query": "celebrity intermittent fasting"},
             "Several actors follow a 16:8 schedule, magazines report."),
        ),
        unrelated=(
            ("Checking train times to Lyon.", "search_trains", {"from": "Paris", "to": "Lyon"},
             "TGV 8:04, 9:04, 10:04."),
            ("Reading the rules of cricket.", "web_search", {"query": "cricket rules"}, "Each side has eleven players."),
        ),
        lasting={
            "permission": ("Reading the full text of Smith 2021.", "get_fulltext", {"id": "smith2021"},
                           "ERROR: 401 Unauthorized: institutional subscription required"),
            "not_found": ("Reading the abstract of Smith 2021.", "get_abstract", {"id": "smith2021"},
                          "ERROR: no record found for id smith2021"),
            "unsupported": ("Searching the paper database.", "search_papers", {"query": "fasting blood pressure"},
                            "ERROR: search is not available in your plan (metadata lookup only)"),
        },
        transient=("Searching for studies.", "search_papers", {"query": "fasting blood pressure"},
                   "ERROR: 429 too many requests, rate limit exceeded; retry in 60 s"),
        poll=("Checking whether the PDF conversion finished.", "get_job", {"job": "pdf-12"},
              ("pdf-12: converting", "pdf-12: converting", "pdf-12: done, 14 pages")),
        page=("Reading more search results.", "search_papers", {"query": "intermittent fasting blood pressure"},
              ("results 1-10: Smith 2021; Lee 2022; ...", "results 11-20: Rossi 2020; Patel 2019; ...",
               "results 21-30: Gomez 2023; Ito 2018; ...")),
        cannot="The paper database refuses every search with my plan, so I cannot find the studies.",
        risk_tools={"search_papers": "read_only", "write_file": "reversible", "submit_manuscript": "irreversible"},
    ),
    # ---------------------------------------------------------------- test domains
    Domain(
        name="hr_onboarding",
        split="test",
        goal="Onboard the new engineer Priya Nair starting June 10: create her accounts, assign a laptop and "
        "schedule her first-day orientation.",
        criteria=(
            "email and Slack accounts created for Priya Nair",
            "a laptop assigned to Priya Nair",
            "first-day orientation scheduled on June 10",
        ),
        steps=(
            ("Creating the email account for Priya Nair.", "create_account",
             {"system": "email", "name": "Priya Nair"}, "Account priya.nair@corp.example created."),
            ("Creating her Slack account.", "create_account", {"system": "slack", "email": "priya.nair@corp.example"},
             "Slack user @priya.nair created and invited to #engineering."),
            ("Assigning a laptop from inventory to Priya Nair.", "assign_asset",
             {"type": "laptop", "to": "priya.nair@corp.example"}, "Asset LT-2291 (ThinkPad X1) assigned to Priya Nair."),
            ("Scheduling her orientation on June 10.", "create_event",
             {"title": "Orientation: Priya Nair", "date": "2025-06-10", "time": "09:30"},
             "Event created: Orientation: Priya Nair, June 10 09:30-11:00, invites sent."),
        ),
        final_good="Priya Nair is onboarded: email priya.nair@corp.example and Slack @priya.nair created, laptop "
        "LT-2291 assigned, orientation scheduled June 10 at 09:30.",
        final_partial="Her email and Slack accounts exist; the laptop and the orientation are still to be arranged.",
        final_claim="Onboarding is complete.",
        related=(
            ("Checking Priya Nair's start date in the HR system.", "get_employee", {"name": "Priya Nair"},
             "Priya Nair, Software Engineer, start date 2025-06-10, manager Tom Berg."),
            ("Adding her to the engineering mailing list.", "add_to_group", {"group": "eng-all", "email": "priya.nair@corp.example"},
             "priya.nair@corp.example added to eng-all."),
        ),
        partly=(
            ("Checking the parking options at the office.", "read_doc", {"name": "parking"},
             "Visitor parking is on level -2; staff badges open level -1."),
            ("Reviewing the engineering onboarding checklist.", "read_doc", {"name": "eng-onboarding"},
             "Week 1: laptop setup, repo access, buddy lunch."),
        ),
        tangential=(
            ("Reading about the company's history.", "read_doc", {"name": "about-us"}, "Founded in 2009 in Oslo."),
            ("Looking at the engineering team's holiday calendar.", "list_events", {"calendar": "eng-holidays"},
             "Tom Berg off July 1-14."),
        ),
        unrelated=(
            ("Browsing used cars for sale.", "web_search", {"query": "used hybrid cars"}, "Toyota Prius 2018, 14,000 EUR"),
            ("Checking the score of the tennis final.", "web_search", {"query": "tennis final score"}, "6-4 3-6 7-5"),
        ),
        lasting={
            "permission": ("Creating the email account.", "create_account", {"system": "email", "name": "Priya Nair"},
                           "ERROR: access denied: only identity admins can create accounts"),
            "not_found": ("Assigning a laptop.", "assign_asset", {"type": "laptop"},
                          "ERROR: no laptops found in inventory for site Oslo"),
            "unsupported": ("Creating the Slack account.", "create_account", {"system": "slack"},
                            "ERROR: system 'slack' is not supported by the provisioning API"),
        },
        transient=("Creating the email account.", "create_account", {"system": "email"},
                   "ERROR: directory service timed out, try again"),
        poll=("Checking whether the laptop has been imaged.", "get_asset", {"id": "LT-2291"},
              ("LT-2291: imaging", "LT-2291: imaging", "LT-2291: ready for pickup")),
        page=("Listing more available laptops.", "list_assets", {"type": "laptop", "status": "free"},
              ("1-5: LT-2291, LT-2295, ...", "6-10: LT-2302, LT-2310, ...", "11-12: LT-2315, LT-2320")),
        cannot="I lack the identity admin role, so I cannot create her accounts.",
        risk_tools={"create_account": "reversible", "get_employee": "read_only", "delete_account": "irreversible",
                    "update_salary": "regulated"},
    ),
    Domain(
        name="devops_incident",
        split="test",
        goal="Restore the checkout service after the 5xx spike: find the cause, roll back the faulty deploy and "
        "confirm the error rate is back under 1%.",
        criteria=(
            "the cause of the 5xx spike identified",
            "the faulty deploy rolled back",
            "checkout error rate below 1%",
        ),
        steps=(
            ("Reading the checkout error rate and recent deploys.", "get_metrics",
             {"service": "checkout", "metric": "http_5xx_rate"}, "checkout 5xx rate 23% since 14:02; deploy v2.14.0 at 14:01"),
            ("Reading the checkout logs around 14:02.", "search_logs", {"service": "checkout", "since": "14:00"},
             "14:02:11 ERROR NullPointerException in PriceCalculator.apply (v2.14.0) x 18,204"),
            ("v2.14.0 broke PriceCalculator; rolling back checkout to v2.13.2.", "rollback_deploy",
             {"service": "checkout", "to": "v2.13.2"}, "Rollback of checkout to v2.13.2 complete (12/12 pods)."),
            ("Confirming the checkout error rate after the rollback.", "get_metrics",
             {"service": "checkout", "metric": "http_5xx_rate"}, "checkout 5xx rate 0.3% over the last 10 minutes"),
        ),
        final_good="Cause: deploy v2.14.0 broke PriceCalculator (NullPointerException); rolled checkout back to "
        "v2.13.2; the checkout 5xx error rate is now 0.3%, below 1%.",
        final_partial="The cause is v2.14.0 (PriceCalculator errors); the rollback is not done yet.",
        final_claim="Incident resolved.",
        related=(
            ("Checking the diff of deploy v2.14.0.", "get_deploy_diff", {"service": "checkout", "version": "v2.14.0"},
             "PriceCalculator.apply: discount may be null after refactor"),
            ("Posting a status update in the incident channel.", "post_message",
             {"channel": "#inc-checkout", "text": "Rolling back checkout to v2.13.2"}, "Message posted."),
        ),
        partly=(
            ("Checking the database CPU in case it is related.", "get_metrics", {"service": "orders-db", "metric": "cpu"},
             "orders-db CPU 41%"),
            ("Reading the checkout runbook.", "read_doc", {"name": "checkout-runbook"},
             "For 5xx spikes check recent deploys first, then dependencies."),
        ),
        tangential=(
            ("Reviewing the Kubernetes upgrade plan for next quarter.", "read_doc", {"name": "k8s-upgrade-plan"},
             "Upgrade clusters to 1.31 in Q3."),
            ("Looking at the search service latency.", "get_metrics", {"service": "search", "metric": "p99"},
             "search p99 180 ms"),
        ),
        unrelated=(
            ("Ordering team lunch.", "web_search", {"query": "pizza delivery near office"}, "3 places open now."),
            ("Reading a movie review.", "fetch_url", {"url": "https://films.example/review"}, "A slow but rewarding film."),
        ),
        lasting={
            "permission": ("Rolling back checkout.", "rollback_deploy", {"service": "checkout", "to": "v2.13.2"},
                           "ERROR: forbidden: user incident-bot cannot patch deployments in namespace prod"),
            "not_found": ("Rolling back checkout to v2.13.2.", "rollback_deploy", {"service": "checkout", "to": "v2.13.2"},
                          "ERROR: revision v2.13.2 not found in the deploy history"),
            "unsupported": ("Rolling back checkout.", "rollback_deploy", {"service": "checkout"},
                            "ERROR: rollback is not implemented for services managed by the legacy pipeline"),
        },
        transient=("Reading the metrics.", "get_metrics", {"service": "checkout"},
                   "ERROR: metrics backend 502 bad gateway"),
        poll=("Checking the rollback progress.", "get_rollout", {"service": "checkout"},
              ("rollout: 4/12 pods updated", "rollout: 4/12 pods updated", "rollout: 12/12 pods updated")),
        page=("Reading more log lines.", "search_logs", {"service": "checkout", "since": "14:00"},
              ("lines 1-50: NullPointerException ...", "lines 51-100: retries exhausted for order ...",
               "lines 101-150: circuit breaker open for pricing ...")),
        cannot="The incident bot has no permission to change production deployments, so the rollback is not possible.",
        risk_tools={"get_metrics": "read_only", "rollback_deploy": "irreversible", "post_message": "irreversible",
                    "scale_service": "reversible"},
    ),
    Domain(
        name="ecommerce_catalog",
        split="test",
        goal="Update the catalog for the summer sale: set a 20% discount on all sandals, check the new prices and "
        "publish the sale banner.",
        criteria=(
            "a 20% discount applied to all sandals",
            "the new sandal prices verified",
            "the summer sale banner published",
        ),
        steps=(
            ("Listing all products in the sandals category.", "list_products", {"category": "sandals"},
             "14 sandals: SKU SA-100 39.90, SA-101 44.90, ... SA-113 59.90"),
            ("Applying a 20% discount to the 14 sandals.", "bulk_discount", {"category": "sandals", "percent": 20},
             "Discount 20% applied to 14 products in sandals."),
            ("Checking the new sandal prices.", "list_products", {"category": "sandals", "fields": "price,sale_price"},
             "14 sandals: SA-100 39.90 -> 31.92, SA-101 44.90 -> 35.92, ... SA-113 59.90 -> 47.92"),
            ("Publishing the summer sale banner.", "publish_banner", {"id": "summer-sale"},
             "Banner summer-sale published on the home page."),
        ),
        final_good="Applied 20% off to all 14 sandals, verified the new prices (SA-100 31.92 ... SA-113 47.92) and "
        "published the summer sale banner.",
        final_partial="The 20% sandal discount is applied; price checks and the banner remain.",
        final_claim="The sale is live!",
        related=(
            ("Checking that no sandal is excluded from promotions.", "get_promo_rules", {"category": "sandals"},
             "No exclusions for sandals."),
            ("Previewing the summer sale banner.", "preview_banner", {"id": "summer-sale"},
             "Preview: 'Summer sale: 20% off sandals' on the home page."),
        ),
        partly=(
            ("Checking stock levels for sandals.", "get_stock", {"category": "sandals"}, "1,920 units in stock."),
            ("Looking at last year's sale results.", "get_report", {"name": "summer-2024"},
             "Summer 2024 sale: +34% sandal revenue."),
        ),
        tangential=(
            ("Rewriting the description of a winter boot.", "update_product", {"sku": "WB-20", "description": "Warm"},
             "Product WB-20 updated."),
            ("Reading about beach holiday trends.", "web_search", {"query": "beach holiday trends"},
             "More travellers choose shoulder season."),
        ),
        unrelated=(
            ("Checking the company's parking rota.", "read_doc", {"name": "parking-rota"}, "Week 23: team B."),
            ("Looking up the lyrics of a song.", "web_search", {"query": "song lyrics"}, "Lyrics not available."),
        ),
        lasting={
            "permission": ("Applying the discount.", "bulk_discount", {"category": "sandals", "percent": 20},
                           "ERROR: 403: catalog editors cannot change prices; pricing role required"),
            "not_found": ("Listing sandals.", "list_products", {"category": "sandals"},
                          "ERROR: category 'sandals' does not exist"),
            "unsupported": ("Publishing the banner.", "publish_banner", {"id": "summer-sale"},
                            "ERROR: banners are not supported on this storefront theme"),
        },
        transient=("Applying the discount.", "bulk_discount", {"category": "sandals"},
                   "ERROR: request timed out, the catalog service is busy; try again"),
        poll=("Checking whether the price index rebuilt.", "get_index_status", {"index": "prices"},
              ("prices index: rebuilding", "prices index: rebuilding", "prices index: up to date")),
        page=("Listing more sandals.", "list_products", {"category": "sandals"},
              ("1-5: SA-100 ... SA-104", "6-10: SA-105 ... SA-109", "11-14: SA-110 ... SA-113")),
        cannot="Prices cannot be changed with the catalog editor role, so the discount is impossible for me.",
        risk_tools={"list_products": "read_only", "bulk_discount": "regulated", "publish_banner": "irreversible",
                    "update_product": "reversible"},
    ),
    Domain(
        name="finance_reconciliation",
        split="test",
        goal="Reconcile the March bank statement with the ledger, list the unmatched transactions and post the "
        "reconciliation report to the finance channel.",
        criteria=(
            "March bank statement matched against the ledger",
            "unmatched transactions listed",
            "reconciliation report posted to the finance channel",
        ),
        steps=(
            ("Loading the March bank statement.", "get_statement", {"account": "BNK-01", "month": "2025-03"},
             "312 transactions, closing balance 184,220.15"),
            ("Loading March ledger entries for the bank account.", "get_ledger", {"account": "1020", "month": "2025-03"},
             "309 entries, balance 183,905.15"),
            ("Matching statement transactions to ledger entries.", "match_transactions",
             {"statement": "BNK-01/2025-03", "ledger": "1020/2025-03"},
             "306 matched; unmatched: 3 statement lines (fee 15.00, interest 300.00, card 412.80), 3 ledger entries"),
            ("Posting the reconciliation report.", "post_message",
             {"channel": "#finance", "text": "March reconciliation: 306 matched, 6 unmatched (list attached)"},
             "Message posted to #finance with reconciliation_march.xlsx."),
        ),
        final_good="March reconciled: 306 of 312 statement lines matched to the ledger; unmatched: bank fee 15.00, "
        "interest 300.00, card 412.80 and 3 ledger entries; report posted to #finance.",
        final_partial="Statement and ledger are loaded; matching and the report are still to do.",
        final_claim="All reconciled, numbers look fine.",
        related=(
            ("Checking the February closing balance carried forward.", "get_statement",
             {"account": "BNK-01", "month": "2025-02"}, "February closing balance 171,034.90"),
            ("Looking up the card transaction of 412.80.", "get_card_tx", {"amount": 412.80},
             "412.80 on March 28, vendor CloudHost, receipt missing"),
        ),
        partly=(
            ("Checking the FX rates used in March.", "get_fx", {"month": "2025-03"}, "EURUSD avg 1.08"),
            ("Reading the month-end close checklist.", "read_doc", {"name": "close-checklist"},
             "Reconcile bank, accruals, prepaids, payroll."),
        ),
        tangential=(
            ("Reviewing next year's budget draft.", "read_doc", {"name": "budget-2026"}, "Opex +6%."),
            ("Looking at the stock market today.", "web_search", {"query": "stock market today"}, "Indices flat."),
        ),
        unrelated=(
            ("Planning the office party playlist.", "web_search", {"query": "party playlist"}, "Top 40 hits."),
            ("Reading about garden irrigation.", "web_search", {"query": "drip irrigation"}, "Drip lines save water."),
        ),
        lasting={
            "permission": ("Loading the ledger.", "get_ledger", {"account": "1020"},
                           "ERROR: user recon-bot is not authorized to read ledger account 1020"),
            "not_found": ("Loading the March statement.", "get_statement", {"account": "BNK-01", "month": "2025-03"},
                          "ERROR: statement for BNK-01 2025-03 does not exist yet"),
            "unsupported": ("Matching transactions.", "match_transactions", {"statement": "BNK-01/2025-03"},
                            "ERROR: automatic matching is not supported for multi-currency accounts"),
        },
        transient=("Loading the ledger.", "get_ledger", {"account": "1020"},
                   "ERROR: ERP connection refused, temporarily unavailable"),
        poll=("Checking the statement import.", "get_import", {"id": "imp-3"},
              ("import imp-3: processing", "import imp-3: processing", "import imp-3: complete, 312 lines")),
        page=("Reading more unmatched lines.", "list_unmatched", {"run": "rec-03"},
              ("1-2: fee 15.00; interest 300.00", "3-4: card 412.80; ledger JE-881", "5-6: ledger JE-902; JE-917")),
        cannot="I am not authorized to read the ledger, so reconciling March is not possible.",
        risk_tools={"get_statement": "read_only", "post_journal_entry": "regulated", "post_message": "irreversible"},
    ),
    Domain(
        name="legal_review",
        split="test",
        goal="Review the supplier contract from Northwind for an auto-renewal clause and a liability cap, and send "
        "the findings to the legal team.",
        criteria=(
            "the auto-renewal clause of the Northwind contract reviewed",
            "the liability cap of the Northwind contract reviewed",
            "findings sent to the legal team",
        ),
        steps=(
            ("Opening the Northwind supplier contract.", "get_document", {"name": "Northwind supply agreement 2025"},
             "Northwind Supply Agreement, 18 pages, signed draft v3"),
            ("Finding the renewal clause.", "search_document", {"doc": "northwind-v3", "query": "renewal"},
             "Clause 14.2: the agreement renews automatically for 12 months unless notice is given 90 days before."),
            ("Finding the liability cap.", "search_document", {"doc": "northwind-v3", "query": "liability"},
             "Clause 17.1: liability capped at fees paid in the previous 12 months; excludes gross negligence."),
            ("Sending the findings to the legal team.", "send_email",
             {"to": "legal@corp.example", "subject": "Northwind contract: renewal and liability"},
             "Email sent to legal@corp.example."),
        ),
        final_good="Northwind contract reviewed: clause 14.2 auto-renews for 12 months unless 90 days notice; clause "
        "17.1 caps liability at 12 months of fees (gross negligence excluded); findings sent to the legal team.",
        final_partial="I found the auto-renewal clause (14.2); the liability cap and the email to legal remain.",
        final_claim="The contract looks fine, nothing to worry about.",
        related=(
            ("Checking the notice address for termination.", "search_document", {"doc": "northwind-v3", "query": "notice"},
             "Clause 22: notices to legal@northwind.example."),
            ("Comparing with our standard liability position.", "read_doc", {"name": "contract-playbook"},
             "Our standard cap is 2x annual fees."),
        ),
        partly=(
            ("Reading the payment terms.", "search_document", {"doc": "northwind-v3", "query": "payment"},
             "Clause 6: payment net 45."),
            ("Checking who signed previous Northwind agreements.", "search_contracts", {"party": "Northwind"},
             "2023 agreement signed by M. Duval."),
        ),
        tangential=(
            ("Reading Northwind's company news.", "web_search", {"query": "Northwind news"}, "Northwind opened a new depot."),
            ("Looking up the history of contract law.", "web_search", {"query": "history of contract law"},
             "Roman law recognised several contract types."),
        ),
        unrelated=(
            ("Checking the weather for the weekend.", "get_weather", {"city": "Brussels"}, "Sunny, 22C."),
            ("Reading a chess puzzle.", "fetch_url", {"url": "https://chess.example/puzzle"}, "White to move and mate in 3."),
        ),
        lasting={
            "permission": ("Opening the Northwind contract.", "get_document", {"name": "Northwind supply agreement 2025"},
                           "ERROR: access denied: document is restricted to the legal group"),
            "not_found": ("Opening the Northwind contract.", "get_document", {"name": "Northwind supply agreement 2025"},
                          "ERROR: document 'Northwind supply agreement 2025' not found"),
            "unsupported": ("Searching the contract.", "search_document", {"doc": "northwind-v3"},
                            "ERROR: full-text search is not supported for scanned PDFs"),
        },
        transient=("Opening the contract.", "get_document", {"name": "Northwind supply agreement 2025"},
                   "ERROR: document service unavailable (503), retry later"),
        poll=("Checking the OCR job on the scanned contract.", "get_job", {"job": "ocr-55"},
              ("ocr-55: queued", "ocr-55: queued", "ocr-55: done, 18 pages")),
        page=("Reading more pages of the contract.", "read_pages", {"doc": "northwind-v3"},
              ("pages 1-6: definitions, scope ...", "pages 7-12: pricing, payment ...", "pages 13-18: term, liability ...")),
        cannot="The contract is restricted to the legal group and I cannot open it.",
        risk_tools={"get_document": "read_only", "send_email": "irreversible", "sign_contract": "regulated"},
    ),
)  # fmt: skip


def _more() -> tuple[Domain, ...]:
    """The domains of every ``_trajectories_<theme>.py`` next to this file, in file-name order."""
    found: list[Domain] = []
    for path in sorted(Path(__file__).resolve().parent.glob("_trajectories_*.py")):
        found.extend(importlib.import_module(path.stem).DOMAINS)
    return tuple(found)


DOMAINS: tuple[Domain, ...] = _FIRST + _more()

_names = [d.name for d in DOMAINS]
if len(set(_names)) != len(_names):
    raise ValueError(f"domain names repeat: {sorted(n for n in _names if _names.count(n) > 1)}")
for _d in DOMAINS:
    if _problems := check(_d):
        raise ValueError(f"domain {_d.name}: " + "; ".join(_problems))
