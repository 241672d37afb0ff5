# ruff: noqa: E501  (data: long literal lines read better unbroken)
"""Scripted trajectories for the development set: supply-chain domains (own work, Apache-2.0).

Four tasks from purchasing, supplier management, quality and warehouse operations: restocking an item below its
reorder point, onboarding a new supplier, filing a supplier defect report, and re-slotting fast movers in a
warehouse. Each is written as a ``Domain`` (see ``_domain.py``); ``build_devset.py`` turns it into labelled states.
"""

from __future__ import annotations

from _domain import Domain

DOMAINS: tuple[Domain, ...] = (
    # ---------------------------------------------------------------- test domain
    Domain(
        name="inventory_restock",
        split="test",
        goal="BRK-2207 (front ceramic brake pad set) has dropped below its reorder point at the Leeds distribution "
        "centre. Raise a purchase order with its preferred supplier for enough units to cover 60 days of forecast "
        "demand plus safety stock, keep the order under my 4,000 GBP approval limit, and send the PO number to the "
        "buyer, Priya Nair.",
        criteria=(
            "a purchase order for BRK-2207 placed with the preferred supplier, delivering to the Leeds DC",
            "the quantity covers 60 days of forecast demand plus safety stock",
            "the PO total is under 4,000 GBP",
            "Priya Nair has been sent the PO number",
        ),
        steps=(
            ("Pulling the current stock position for BRK-2207 at the Leeds DC.", "get_stock_level",
             {"sku": "BRK-2207", "site": "LDS-DC"},
             "BRK-2207 Ceramic brake pad set (front) @ LDS-DC: on_hand 38, allocated 22, available 16, on_order 0, "
             "reorder_point 60, uom EA"),
            ("Only 16 available against a reorder point of 60. I need the 60-day forecast to size the order.",
             "get_demand_forecast", {"sku": "BRK-2207", "site": "LDS-DC", "horizon_days": 60},
             "BRK-2207 @ LDS-DC, horizon 60d: forecast 246 EA (avg 4.1/day, model ETS, MAPE 11.2%); safety_stock 40 EA"),
            ("So 246 + 40 - 16 = 270 units needed. Who is the preferred supplier, and at what price?",
             "get_supplier_terms", {"sku": "BRK-2207"},
             "BRK-2207 sourcing:\n  [preferred] SUP-0419 Halden Friction Ltd  13.85 GBP/EA  case_pack 10  MOQ 100  "
             "lead_time 6d\n  [alternate] SUP-0772 Brakeline Europe BV  12.90 GBP/EA  case_pack 20  MOQ 500  lead_time 21d"),
            ("270 x 13.85 = 3,739.50 GBP: inside the 4,000 limit, 27 full cases and above the MOQ. Raising the PO "
             "with Halden.", "create_purchase_order",
             {"supplier": "SUP-0419", "sku": "BRK-2207", "qty": 270, "unit_price": 13.85, "currency": "GBP",
              "ship_to": "LDS-DC"},
             "PO-58213 created, status SUBMITTED. Supplier SUP-0419 Halden Friction Ltd; line 1: BRK-2207 x 270 @ "
             "13.85 = 3,739.50 GBP; ship_to LDS-DC; promised_date 2025-06-17"),
            ("PO is in. Sending Priya the number and the details.", "send_message",
             {"to": "priya.nair@kestrelparts.co.uk", "subject": "PO-58213 raised: BRK-2207 restock for Leeds DC",
              "body": "270 x BRK-2207 from Halden Friction (SUP-0419), 3,739.50 GBP, promised 2025-06-17."},
             "sent: id msg-90d4e1, to priya.nair@kestrelparts.co.uk, 2025-06-11T09:42:17Z"),
        ),
        final_good="Raised PO-58213 with the preferred supplier, Halden Friction Ltd (SUP-0419): 270 x BRK-2207 "
        "delivering to LDS-DC, promised 2025-06-17. Sizing: 60-day forecast 246 + safety stock 40 = 286, less 16 "
        "available = 270 (27 cases of 10, above the MOQ of 100). Total 3,739.50 GBP at 13.85 GBP/unit, under your "
        "4,000 GBP limit. Priya Nair has been sent the PO number (message msg-90d4e1).",
        final_partial="So far I have BRK-2207's position at LDS-DC (16 available, reorder point 60) and the 60-day "
        "forecast. The purchase order with the preferred supplier has not been raised yet, so there is no PO "
        "number, and Priya Nair has not been told anything.",
        final_claim="All sorted: the brake pads are on order and Priya is in the loop.",
        related=(
            ("Before ordering, making sure nobody already has an open PO for BRK-2207.", "list_purchase_orders",
             {"sku": "BRK-2207", "status": "open"}, "[] (0 open purchase orders match sku=BRK-2207)"),
            ("Confirming my approval limit covers the brakes category.", "get_approval_limits", {"user": "me"},
             "j.whitfield: single_po_limit 4,000.00 GBP; categories BRAKES, FILTERS, WIPERS; monthly_cap 25,000.00 GBP "
             "(used 9,120.40)"),
        ),
        partly=(
            ("While I'm here: which other brake lines at Leeds are under their reorder point?", "list_low_stock",
             {"site": "LDS-DC", "category": "BRAKES"},
             "3 SKUs below reorder point: BRK-2207 (16/60), BRK-3110 (8/25), DSC-0418 (31/40)"),
            ("The rear set BRK-2208 usually sells alongside the fronts; checking it too.", "get_stock_level",
             {"sku": "BRK-2208", "site": "LDS-DC"},
             "BRK-2208 Ceramic brake pad set (rear) @ LDS-DC: on_hand 84, allocated 13, available 71, on_order 0, "
             "reorder_point 50, uom EA"),
        ),
        tangential=(
            ("Reading up on ceramic versus semi-metallic brake pads.", "web_search",
             {"query": "ceramic vs semi-metallic brake pads wear noise"},
             "Ceramic pads run quieter and shed less dust but cost more; semi-metallic pads cope better with heat "
             "under heavy braking and towing."),
            ("Having a look at Halden Friction's news page.", "fetch_url", {"url": "https://haldenfriction.co.uk/news"},
             "12 May 2025 - Halden Friction opens new R&D lab in Sheffield. 2 Apr 2025 - Halden named Supplier of the "
             "Year at the UK Aftermarket Awards."),
        ),
        unrelated=(
            ("Finding a free hour next week for a dentist appointment.", "search_calendar",
             {"query": "free slots", "week": "2025-W25"}, "Free: Tue 17 Jun 14:00-15:30; Thu 19 Jun 10:00-11:00"),
            ("Checking how the Test match at Lord's is going.", "web_search", {"query": "Lord's Test score today"},
             "England 412 & 188/4; India 356. Day 4, stumps."),
        ),
        lasting={
            "permission": ("Raising the PO with Halden for 270 units.", "create_purchase_order",
                           {"supplier": "SUP-0419", "sku": "BRK-2207", "qty": 270, "ship_to": "LDS-DC"},
                           "ERROR: 403 Forbidden: role 'inventory-viewer' lacks permission procurement.po.create"),
            "not_found": ("Pulling the stock position for BRK-2207 at Leeds.", "get_stock_level",
                          {"sku": "BRK-2207", "site": "LDS-DC"},
                          "ERROR: 404 Not Found: item BRK-2207 is not ranged at site LDS-DC"),
            "unsupported": ("Raising the purchase order with SUP-0419.", "create_purchase_order",
                            {"supplier": "SUP-0419", "sku": "BRK-2207", "qty": 270, "ship_to": "LDS-DC"},
                            "ERROR: 422 Unprocessable Entity: supplier SUP-0419 receives orders by EDI only; order "
                            "creation through this API is not supported for this supplier"),
        },
        transient=("Fetching the sourcing terms for BRK-2207.", "get_supplier_terms", {"sku": "BRK-2207"},
                   "ERROR: 429 Too Many Requests: rate limit of 60 requests/min exceeded, retry after 15 s"),
        poll=("Has Halden acknowledged PO-58213 yet?", "get_purchase_order", {"po": "PO-58213"},
              ("PO-58213: SUBMITTED, awaiting supplier acknowledgement",
               "PO-58213: SUBMITTED, awaiting supplier acknowledgement",
               "PO-58213: ACKNOWLEDGED by SUP-0419 at 2025-06-11 14:05, confirmed ship date 2025-06-16")),
        page=("Going through the 90-day movement history for BRK-2207.", "list_stock_movements",
              {"sku": "BRK-2207", "site": "LDS-DC", "days": 90},
              ("rows 1-50 of 137: 2025-03-13 PICK -4 SO-771203; 2025-03-13 PICK -2 SO-771244; 2025-03-14 PICK -5 SO-771390; ...",
               "rows 51-100 of 137: 2025-04-22 RECEIPT +200 PO-55710; 2025-04-22 PICK -6 SO-779015; 2025-04-23 PICK -3 SO-779102; ...",
               "rows 101-137 of 137: 2025-06-02 ADJUST -3 (damaged in handling); 2025-06-09 PICK -4 SO-789871; 2025-06-10 PICK -5 SO-790118")),
        cannot="My account only has the inventory-viewer role and cannot create purchase orders, so I can't raise "
        "the BRK-2207 restock myself; someone with PO rights has to place it.",
        risk_tools={"get_stock_level": "read_only", "get_supplier_terms": "read_only",
                    "create_purchase_order": "irreversible", "send_message": "irreversible",
                    "update_reorder_point": "reversible"},
    ),
    # ---------------------------------------------------------------- train domains
    Domain(
        name="supplier_onboarding",
        split="train",
        goal="Onboard Vantor Packaging GmbH as a new supplier in the ERP (company code 1000): verify their VAT "
        "number in VIES, run the sanctions screening, create the vendor record with payment terms net 45 and the "
        "bank account from their signed bank details form, and send the supplier portal invitation to "
        "ap@vantor-packaging.de.",
        criteria=(
            "VAT number DE298765431 confirmed valid in VIES",
            "sanctions screening completed with no match",
            "vendor record created with net 45 terms and the bank account from the signed form",
            "supplier portal invitation sent to ap@vantor-packaging.de",
        ),
        steps=(
            ("First the signed bank details form, which has the VAT number and IBAN I need.", "get_document",
             {"folder": "Procurement/Onboarding", "name": "Vantor Packaging - bank details form (signed)"},
             "DOC-44127 (PDF, 2 pages, signed 2025-04-02 by M. Albrecht, CFO): Vantor Packaging GmbH, "
             "Industriestr. 14, 33602 Bielefeld; USt-IdNr. DE298765431; IBAN DE44 4805 0161 0043 0062 97; "
             "BIC SPBIDE3BXXX; AP contact ap@vantor-packaging.de"),
            ("Verifying DE298765431 against VIES.", "vies_check_vat", {"country": "DE", "number": "298765431"},
             '{"countryCode": "DE", "vatNumber": "298765431", "requestDate": "2025-04-07+02:00", "valid": true, '
             '"name": "---", "address": "---"}'),
            ("VAT is valid. Now the sanctions screen on the legal entity.", "screen_sanctions",
             {"name": "Vantor Packaging GmbH", "country": "DE", "lists": ["EU", "OFAC_SDN", "UK_HMT", "UN"]},
             "screening SCR-20250407-0193: 0 matches (EU consolidated, OFAC SDN, UK HMT, UN); status CLEAR"),
            ("Screen is clear. Validating the IBAN from the form before it goes into the vendor master.",
             "validate_iban", {"iban": "DE44480501610043006297"},
             "IBAN DE44480501610043006297: checksum OK; bank Sparkasse Bielefeld, BIC SPBIDE3BXXX; SEPA reachable"),
            ("Creating the vendor in company code 1000 with NET45 and the validated bank account.", "create_vendor",
             {"company_code": "1000", "name": "Vantor Packaging GmbH", "vat": "DE298765431", "payment_terms": "NET45",
              "iban": "DE44480501610043006297", "bic": "SPBIDE3BXXX", "currency": "EUR"},
             "Vendor V-100388 created in company code 1000: Vantor Packaging GmbH, terms NET45, currency EUR, "
             "bank account ...6297 (Sparkasse Bielefeld), status ACTIVE"),
            ("Last step: the portal invite to their AP mailbox.", "send_portal_invite",
             {"vendor": "V-100388", "email": "ap@vantor-packaging.de"},
             "Invitation INV-7c21 sent to ap@vantor-packaging.de for vendor V-100388; link expires 2025-04-21"),
        ),
        final_good="Vantor Packaging GmbH is onboarded as vendor V-100388 in company code 1000. VIES confirms VAT "
        "number DE298765431 as valid (2025-04-07); sanctions screening SCR-20250407-0193 came back CLEAR on the EU, "
        "OFAC, UK HMT and UN lists; the vendor has NET45 terms and the bank account from the signed form DOC-44127 "
        "(IBAN ending 6297, Sparkasse Bielefeld, checksum validated). Portal invitation INV-7c21 went to "
        "ap@vantor-packaging.de and is valid until 2025-04-21.",
        final_partial="I've read the signed bank form (DOC-44127), confirmed the VAT number DE298765431 in VIES and "
        "the sanctions screen is clear. Still to do: validate the IBAN, create the vendor record with NET45, and "
        "send the portal invitation.",
        final_claim="Vantor is fully onboarded and ready to go.",
        related=(
            ("Making sure Vantor doesn't already exist in the vendor master.", "search_vendors",
             {"query": "Vantor", "company_code": "1000"}, "0 vendors match 'Vantor' in company code 1000"),
            ("Pulling the supplier request to confirm the agreed payment terms.", "get_supplier_request",
             {"id": "SRQ-1187"},
             "SRQ-1187: Vantor Packaging GmbH, requested by L. Okafor (packaging buyer), approved 2025-04-01 by "
             "procurement; agreed terms NET45, currency EUR"),
        ),
        partly=(
            ("Asking Vantor for their ISO 9001 certificate for the supplier file.", "send_email",
             {"to": "ap@vantor-packaging.de", "subject": "ISO 9001 certificate for our supplier file"},
             "Email sent (message id 3f81a2) to ap@vantor-packaging.de"),
            ("Pulling a credit report on Vantor.", "get_credit_report", {"company": "Vantor Packaging GmbH", "country": "DE"},
             "Creditreform index 212 (good); founded 2009; 140 employees; turnover 2024 est. 31 M EUR"),
        ),
        tangential=(
            ("What VAT rate applies to corrugated packaging in Germany?", "web_search",
             {"query": "Germany VAT rate cardboard packaging"},
             "Packaging materials are taxed at the standard 19% rate; the reduced 7% rate does not apply."),
            ("Looking at corrugated board price trends.", "web_search", {"query": "corrugated board price index Europe 2025"},
             "European containerboard prices rose about 4% in Q1 2025 on higher recovered-paper costs."),
        ),
        unrelated=(
            ("Booking a meeting room for Thursday's all-hands.", "book_room",
             {"room": "Atlas 3", "date": "2025-04-10", "time": "15:00-16:00"}, "Atlas 3 booked 2025-04-10 15:00-16:00"),
            ("Checking whether the office coffee beans order has shipped.", "track_parcel", {"tracking": "1Z999AA10123456784"},
             "In transit: departed Cologne hub 06:12, expected delivery tomorrow by 12:00"),
        ),
        lasting={
            "permission": ("Creating the vendor record for Vantor.", "create_vendor",
                           {"company_code": "1000", "name": "Vantor Packaging GmbH", "payment_terms": "NET45"},
                           "ERROR: 403 Forbidden: user svc-procure-agent lacks authorisation F_LFA1_BUK for company "
                           "code 1000 (vendor master maintenance)"),
            "not_found": ("Fetching Vantor's signed bank details form.", "get_document",
                          {"folder": "Procurement/Onboarding", "name": "Vantor Packaging - bank details form (signed)"},
                          "ERROR: 404: no document named 'Vantor Packaging - bank details form (signed)' in "
                          "Procurement/Onboarding"),
            "unsupported": ("Running the sanctions screen on Vantor.", "screen_sanctions",
                            {"name": "Vantor Packaging GmbH", "country": "DE"},
                            "ERROR: entity screening is not supported on this subscription (individual persons only)"),
        },
        transient=("Verifying DE298765431 against VIES.", "vies_check_vat", {"country": "DE", "number": "298765431"},
                   "ERROR: VIES fault MS_MAX_CONCURRENT_REQ: maximum concurrent requests for member state DE "
                   "reached, try again later"),
        poll=("Has Vantor accepted the portal invitation?", "get_invite_status", {"invite": "INV-7c21"},
              ("INV-7c21: SENT, not yet opened", "INV-7c21: SENT, not yet opened",
               "INV-7c21: ACCEPTED by ap@vantor-packaging.de on 2025-04-08 09:14")),
        page=("Paging through the existing packaging vendors.", "list_vendors",
              {"company_code": "1000", "category": "PACKAGING"},
              ("1-25 of 61: V-100012 Kartonwerk Rhein GmbH; V-100047 Smurfit Westrock DE; V-100059 Papierfabrik Lahr; ...",
               "26-50 of 61: V-100201 Folien Nord GmbH; V-100233 Beck Etiketten; V-100240 Palettenhandel Ost; ...",
               "51-61 of 61: V-100355 Schrumpf & Stretch KG; V-100371 Tape Solutions BV; V-100380 Kistenbau Mayer")),
        cannot="I don't have vendor master maintenance rights for company code 1000, so I can't create the Vantor "
        "Packaging vendor record; a master-data administrator will need to create it.",
        risk_tools={"vies_check_vat": "read_only", "get_document": "read_only", "create_vendor": "regulated",
                    "send_portal_invite": "irreversible", "update_vendor": "reversible"},
    ),
    Domain(
        name="quality_defect_report",
        split="train",
        goal="Incoming inspection found cracked pump housings (part PH-410) in lot L-24-0871 from Norvik Castings. "
        "Put the lot on quality hold and issue a supplier corrective action request (SCAR) to Norvik with the "
        "inspection results attached.",
        criteria=(
            "lot L-24-0871 is on quality hold",
            "a SCAR issued to Norvik Castings for the cracked PH-410 housings in lot L-24-0871",
            "the inspection results are attached to the SCAR",
        ),
        steps=(
            ("Opening the incoming inspection record for lot L-24-0871.", "get_inspection_record",
             {"lot": "L-24-0871"},
             "IR-3392 | lot L-24-0871 | PH-410 pump housing, rev C | supplier Norvik Castings AS | PO-77120 | "
             "received 500 EA 2025-05-06 | sample 32 (AQL 1.0, level II) | rejects 5: hairline crack at flange boss "
             "(dye penetrant) | disposition REJECT"),
            ("5 of 32 cracked, lot rejected. Blocking it before anything gets issued to the line.", "set_lot_status",
             {"lot": "L-24-0871", "status": "QUALITY_HOLD", "reason": "IR-3392: flange boss cracks, 5/32 rejects"},
             "lot L-24-0871 -> QUALITY_HOLD (500 EA moved to location RCV-HOLD-02); previous status RECEIVED"),
            ("Hold is in place. Issuing the SCAR to Norvik with IR-3392 attached.", "create_scar",
             {"supplier": "Norvik Castings AS", "part": "PH-410", "lot": "L-24-0871",
              "defect": "hairline crack at flange boss, 5/32 sample rejects", "attachments": ["IR-3392"]},
             "SCAR-2025-041 issued to Norvik Castings AS (quality@norvikcastings.no); attachments: IR-3392 "
             "(3 files); D3 containment due 2025-05-16, 8D report due 2025-06-06"),
        ),
        final_good="Lot L-24-0871 (500 x PH-410) is on QUALITY_HOLD in RCV-HOLD-02. SCAR-2025-041 was issued to "
        "Norvik Castings AS for the hairline cracks at the flange boss (5 of 32 sampled rejected, inspection record "
        "IR-3392), with IR-3392 attached; containment is due 2025-05-16 and the 8D by 2025-06-06.",
        final_partial="Inspection record IR-3392 confirms the cracks (5 of 32 rejected) in lot L-24-0871. The lot "
        "is not on hold yet and no SCAR has been issued to Norvik Castings.",
        final_claim="Done: the lot is handled and Norvik has been notified.",
        related=(
            ("Listing what's attached to IR-3392 so the SCAR carries the evidence.", "list_attachments",
             {"record": "IR-3392"}, "IR-3392 attachments: crack_flange_01.jpg (2.1 MB), crack_flange_02.jpg (1.8 MB), "
             "dp_test_sheet.pdf (240 KB)"),
            ("Confirming the PO and supplier contact for the lot.", "get_purchase_order", {"po": "PO-77120"},
             "PO-77120: Norvik Castings AS, PH-410 rev C x 500 @ 38.20 EUR, received 2025-05-06; supplier quality "
             "contact Ingrid Solberg, quality@norvikcastings.no"),
        ),
        partly=(
            ("Are there other Norvik PH-410 lots still in stock that might be affected?", "list_lots",
             {"part": "PH-410", "supplier": "Norvik Castings AS", "status": "AVAILABLE"},
             "2 lots: L-24-0812 (120 EA, WH-A-14-03), L-24-0839 (260 EA, WH-A-14-04)"),
            ("Pulling Norvik's supplier scorecard for the quarter.", "get_supplier_scorecard",
             {"supplier": "Norvik Castings AS", "period": "2025-Q2"},
             "Norvik Castings AS 2025-Q2: quality 1,850 PPM (target 500), on-time delivery 92%, open SCARs 1"),
        ),
        tangential=(
            ("Reading up on the dye penetrant test standard.", "web_search",
             {"query": "ASTM E165 liquid penetrant examination procedure"},
             "ASTM E165 covers liquid penetrant examination: pre-cleaning, penetrant dwell 5-60 min, removal, "
             "developer, and inspection under adequate light."),
            ("Checking when the inspection lab's gauges are next due for calibration.", "list_gauges",
             {"lab": "incoming inspection"},
             "CAL-0091 digital caliper due 2025-07-01; CAL-0114 height gauge due 2025-09-15; CAL-0120 bore gauge due "
             "2025-06-20"),
        ),
        unrelated=(
            ("Setting an out-of-office reply for next week.", "set_auto_reply",
             {"from": "2025-05-19", "to": "2025-05-23", "message": "Back on 26 May."},
             "Automatic reply scheduled 2025-05-19 to 2025-05-23"),
            ("Looking up the rules of padel.", "web_search", {"query": "padel rules scoring walls"},
             "Padel uses tennis scoring; the ball may rebound off the glass walls after bouncing once on the ground."),
        ),
        lasting={
            "permission": ("Issuing the SCAR to Norvik Castings.", "create_scar",
                           {"supplier": "Norvik Castings AS", "part": "PH-410", "lot": "L-24-0871"},
                           "ERROR: 403: role QC-Inspector cannot issue SCARs (requires Supplier Quality Engineer)"),
            "not_found": ("Opening the inspection record for lot L-24-0871.", "get_inspection_record",
                          {"lot": "L-24-0871"}, "ERROR: no inspection record found for lot L-24-0871"),
            "unsupported": ("Attaching IR-3392 to the SCAR.", "create_scar",
                            {"supplier": "Norvik Castings AS", "lot": "L-24-0871", "attachments": ["IR-3392"]},
                            "ERROR: 415 Unsupported Media Type: attachments of type 'inspection_record' are not "
                            "supported; only uploaded files are accepted"),
        },
        transient=("Putting lot L-24-0871 on hold.", "set_lot_status", {"lot": "L-24-0871", "status": "QUALITY_HOLD"},
                   "ERROR: 503 Service Unavailable: WMS lock wait timeout exceeded, try again"),
        poll=("Checking whether Norvik has acknowledged the SCAR.", "get_scar", {"id": "SCAR-2025-041"},
              ("SCAR-2025-041: ISSUED, awaiting supplier acknowledgement",
               "SCAR-2025-041: ISSUED, awaiting supplier acknowledgement",
               "SCAR-2025-041: ACKNOWLEDGED by Ingrid Solberg (Norvik Castings), D3 containment in progress")),
        page=("Reading Norvik's nonconformance history.", "list_nonconformances",
              {"supplier": "Norvik Castings AS", "since": "2024-01-01"},
              ("1-10 of 23: NC-2024-0112 PH-410 porosity; NC-2024-0140 PH-220 dimension out of tolerance; ...",
               "11-20 of 23: NC-2024-0388 PH-410 burr on port face; NC-2024-0415 PH-330 missing cert; ...",
               "21-23 of 23: NC-2025-0061 PH-410 surface pitting; NC-2025-0097 PH-220 wrong rev; NC-2025-0130 PH-410 crack")),
        cannot="My QC-Inspector role can't issue SCARs in the QMS, so I can't file the defect report with Norvik "
        "Castings; a supplier quality engineer has to issue it.",
        risk_tools={"get_inspection_record": "read_only", "set_lot_status": "reversible", "create_scar": "irreversible",
                    "scrap_lot": "irreversible"},
    ),
    Domain(
        name="warehouse_slotting",
        split="train",
        goal="Re-slot the 20 fastest-moving SKUs in zone A of the Rotterdam warehouse (RTM-1) into golden-zone pick "
        "faces (level 2, waist height) by pick velocity over the last 30 days, and create the move tasks for the "
        "night shift of 12 June.",
        criteria=(
            "the top 20 SKUs in zone A by 30-day pick velocity identified",
            "a slotting plan putting them in golden-zone pick faces",
            "move tasks created for the 12 June night shift",
        ),
        steps=(
            ("Ranking zone A SKUs by picks over the last 30 days.", "get_pick_velocity",
             {"site": "RTM-1", "zone": "A", "days": 30, "top": 20},
             "top 20 of 412 SKUs by picks (30d): 80311 1,942; 80207 1,716; 81452 1,503; 80118 1,377; ...; "
             "80990 611 (20th). 11 of 20 already on level 2, 9 on levels 1/3/4"),
            ("9 of the top 20 sit outside the golden zone. What level-2 pick faces are there in A?", "list_locations",
             {"site": "RTM-1", "zone": "A", "level": 2, "type": "pick_face"},
             "48 level-2 pick faces A-01-02 .. A-24-02: 11 hold top-20 SKUs, 29 hold slower SKUs, 8 empty"),
            ("Running the slotting optimiser for the top 20 against those faces.", "compute_slotting_plan",
             {"site": "RTM-1", "zone": "A", "skus": "top20_30d", "target_level": 2, "objective": "velocity"},
             "plan SP-0612-A: 9 moves into level 2 (8 to empty faces, 1 swap), 9 slower SKUs moved out to levels 1/3; "
             "cube fit OK for all 20; est. zone A pick travel -14.2%"),
            ("Plan looks sound. Turning SP-0612-A into move tasks for the 12 June night shift.", "create_move_tasks",
             {"plan": "SP-0612-A", "shift": "2025-06-12 night", "team": "night-replen"},
             "18 move tasks created MT-551201..MT-551218 for shift 2025-06-12 22:00-06:00, team night-replen; "
             "est. labour 3.1 h"),
        ),
        final_good="The top 20 zone A SKUs by 30-day picks at RTM-1 (80311 with 1,942 picks down to 80990 with 611) "
        "were identified; 11 were already on level 2. Plan SP-0612-A moves the other 9 into golden-zone pick faces "
        "and moves 9 slower SKUs out to levels 1/3, with cube fit OK and an estimated 14.2% cut in zone A pick "
        "travel. 18 move tasks (MT-551201..MT-551218, about 3.1 h) are on the 12 June night shift, 22:00-06:00, "
        "for team night-replen.",
        final_partial="I have the top 20 zone A SKUs by 30-day velocity (9 of them are outside level 2) and the list "
        "of golden-zone pick faces. The slotting plan hasn't been computed and no move tasks exist yet for the 12 "
        "June night shift.",
        final_claim="Re-slotting is set up; the night shift has what it needs.",
        related=(
            ("Checking the dimensions of 80311 fit a standard level-2 face.", "get_item_master", {"sku": "80311"},
             "80311: case 40 x 30 x 25 cm, 9.4 kg, 12 per case; pick face A-type max 60 x 40 x 35 cm, 25 kg"),
            ("Is there enough replen capacity on the 12 June night shift?", "get_shift_roster",
             {"site": "RTM-1", "date": "2025-06-12", "shift": "night"},
             "2025-06-12 night (22:00-06:00): 6 operators, 2 reach trucks; planned replen load 7.5 h of 12 h available"),
        ),
        partly=(
            ("Running the same velocity ranking for zone B.", "get_pick_velocity",
             {"site": "RTM-1", "zone": "B", "days": 30, "top": 20},
             "top 20 of 288 SKUs by picks (30d): 71044 1,205; 71210 1,088; ...; 72003 402 (20th). 14 of 20 on level 2"),
            ("Reviewing min/max replenishment triggers on the zone A pick faces.", "get_replen_settings",
             {"site": "RTM-1", "zone": "A"},
             "48 faces: 31 min/max by case, 17 by unit; 6 faces triggered >3 replens/day in the last week"),
        ),
        tangential=(
            ("Checking vessel arrivals at the Port of Rotterdam this week.", "fetch_url",
             {"url": "https://www.portofrotterdam.com/en/shipping/arrivals"},
             "Expected arrivals: MSC Gulsun (ECT Delta) 10 Jun; Ever Ace (RWG) 11 Jun; CMA CGM Jacques Saade 13 Jun"),
            ("Reading about golden-zone ergonomics.", "web_search", {"query": "golden zone picking ergonomics height"},
             "The golden zone, roughly between waist and shoulder height, reduces bending and reaching; guidance "
             "places it around 75-140 cm."),
        ),
        unrelated=(
            ("Looking up the Eurovision final results.", "web_search", {"query": "Eurovision 2025 final results"},
             "Austria won the 2025 Eurovision Song Contest in Basel with 436 points."),
            ("Ordering a birthday card for a colleague.", "shop_search", {"query": "funny birthday card"},
             "24 results: 'Another lap around the sun' 3.95 EUR; 'Vintage edition' 4.50 EUR; ..."),
        ),
        lasting={
            "permission": ("Creating the move tasks for the 12 June night shift.", "create_move_tasks",
                           {"plan": "SP-0612-A", "shift": "2025-06-12 night"},
                           "ERROR: 403 Forbidden: user agent-ops has read-only access to task management at RTM-1"),
            "not_found": ("Ranking zone A SKUs by 30-day picks.", "get_pick_velocity",
                          {"site": "RTM-1", "zone": "A", "days": 30},
                          "ERROR: 404 zone 'A' not found at site RTM-1 (zones: AM, BM, CR, FZ)"),
            "unsupported": ("Running the slotting optimiser for zone A.", "compute_slotting_plan",
                            {"site": "RTM-1", "zone": "A", "target_level": 2},
                            "ERROR: slotting optimisation is not supported at site RTM-1 (module SLOT not licensed)"),
        },
        transient=("Listing level-2 pick faces in zone A.", "list_locations",
                   {"site": "RTM-1", "zone": "A", "level": 2, "type": "pick_face"},
                   "ERROR: 502 Bad Gateway: wms-api upstream connection reset, retry the request"),
        poll=("Waiting on the optimiser run for SP-0612-A.", "get_plan_job", {"job": "SP-0612-A"},
              ("SP-0612-A: RUNNING, 12/20 SKUs evaluated", "SP-0612-A: RUNNING, 12/20 SKUs evaluated",
               "SP-0612-A: COMPLETED, 9 moves in, 9 moves out")),
        page=("Listing all zone A locations.", "list_locations", {"site": "RTM-1", "zone": "A"},
              ("1-64 of 192: A-01-01 80412; A-01-02 80311; A-01-03 empty; A-01-04 81730; ...",
               "65-128 of 192: A-09-01 80655; A-09-02 80207; A-09-03 81902; ...",
               "129-192 of 192: A-17-01 81044; A-17-02 empty; A-17-03 80576; ... A-24-04 81311")),
        cannot="I only have read-only access to task management at RTM-1, so I can't create the move tasks and "
        "the re-slot cannot be scheduled for the night shift.",
        risk_tools={"get_pick_velocity": "read_only", "compute_slotting_plan": "read_only",
                    "create_move_tasks": "reversible", "purge_location_history": "irreversible"},
    ),
)  # fmt: skip
