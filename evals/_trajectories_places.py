# ruff: noqa: E501  (data: long literal lines read better unbroken)
"""Scripted trajectories for the development set: four domains about places and goods on the move (a venue
booking, a shipment reroute, a catering order, a rental listing), written for stopwise (own work, Apache-2.0).

Each domain follows ``_domain.Domain``: a task, the on-goal steps that solve it in order, pools of off-goal steps
for drift, lasting and passing errors, a polled job, a paged list and final answers; ``build_devset.py`` turns
them into labelled states.
"""

from __future__ import annotations

from _domain import Domain

DOMAINS: tuple[Domain, ...] = (
    # ---------------------------------------------------------------- event venue booking (test, 5 steps)
    Domain(
        name="event_venue_booking",
        split="test",
        goal="Book a venue in Berlin for the Halvorsen Analytics team offsite on 12 June 2025 (09:00-18:00) for 60 "
        "people, with a projector, for under 4,000 EUR in total, and send the booking confirmation to the "
        "organiser, Maren Lindqvist (maren.lindqvist@halvorsen-analytics.de).",
        criteria=(
            "a Berlin venue seating 60 booked for 12 June 2025, 09:00-18:00",
            "a projector included and the total under 4,000 EUR",
            "the booking confirmation sent to Maren Lindqvist",
        ),
        steps=(
            ("Let me see which Berlin venues are free on 12 June for 60 people.", "search_venues",
             {"city": "Berlin", "date": "2025-06-12", "min_capacity": 60},
             "4 venues available: V-2291 Spreeloft (cap 80, day rate 3,200 EUR); V-1187 Kesselhaus Mitte (cap 65, "
             "2,750 EUR); V-3340 Atelier Kreuzberg (cap 50, 1,900 EUR); V-0912 Salon am Gendarmenmarkt (cap 120, 6,400 EUR)"),
            ("Kesselhaus Mitte is the cheapest option that still seats 60. Pulling its details for AV and fees.",
             "get_venue_details", {"venue": "V-1187"},
             "Kesselhaus Mitte, Invalidenstr. 44, 10115 Berlin. Layouts: theatre 65, classroom 48, boardroom 30. "
             "AV: projector + 3 m screen included, 2 wireless mics. Cleaning fee 180 EUR. Free cancellation until 2025-05-29."),
            ("Projector is included. Asking for a quote for the full day in theatre layout.", "get_quote",
             {"venue": "V-1187", "date": "2025-06-12", "hours": "09:00-18:00", "attendees": 60, "layout": "theatre"},
             "{\"quote\": \"Q-55817\", \"room_hire\": 2750.00, \"cleaning\": 180.00, \"vat_19\": 556.70, "
             "\"total_eur\": 3486.70, \"valid_until\": \"2025-05-20\"}"),
            ("3,486.70 EUR is under the 4,000 EUR cap. Confirming the booking on quote Q-55817.", "book_venue",
             {"quote": "Q-55817", "company": "Halvorsen Analytics GmbH", "contact": "Maren Lindqvist"},
             "Booking BK-30471 confirmed: Kesselhaus Mitte, 12 June 2025 09:00-18:00, 60 guests, theatre layout, "
             "projector included. Total 3,486.70 EUR. Deposit invoice INV-8812 (30%) due 2025-05-26."),
            ("Sending Maren the confirmation with the booking PDF attached.", "send_email",
             {"to": "maren.lindqvist@halvorsen-analytics.de", "subject": "Offsite venue booked: Kesselhaus Mitte, 12 June",
              "attachments": ["BK-30471.pdf"]},
             "250 OK: message msg-4c19e2 queued for maren.lindqvist@halvorsen-analytics.de (1 attachment, 212 KB)"),
        ),
        final_good="Booked Kesselhaus Mitte (Invalidenstr. 44, Berlin) for 12 June 2025, 09:00-18:00, 60 guests in "
        "theatre layout, projector and screen included: booking BK-30471, total 3,486.70 EUR incl. VAT (under "
        "4,000 EUR), deposit invoice INV-8812 due 26 May. The confirmation went to "
        "maren.lindqvist@halvorsen-analytics.de (message msg-4c19e2).",
        final_partial="Kesselhaus Mitte (V-1187) fits: 65 seats, projector included, quote Q-55817 at 3,486.70 EUR. "
        "I have not booked it yet, so the booking itself and the confirmation email to Maren are still outstanding.",
        final_claim="The offsite venue is sorted and Maren has everything she needs.",
        related=(
            ("Double-checking the theatre floor plan really fits 60 chairs plus a presenter area.", "get_floor_plan",
             {"venue": "V-1187", "layout": "theatre"},
             "Hall A theatre: 13 rows x 5 seats = 65, stage 4 x 3 m, projector throw 6 m, 2 fire exits"),
            ("The contract needs the billing entity, so looking up Halvorsen Analytics' registered address.",
             "get_company_profile", {"name": "Halvorsen Analytics GmbH"},
             "Halvorsen Analytics GmbH, Torstr. 140, 10119 Berlin, VAT DE318842907, cost centre OPS-12"),
        ),
        partly=(
            ("While I'm at it, looking for lunch catering that delivers to Invalidenstr. on 12 June.", "search_caterers",
             {"address": "Invalidenstr. 44, Berlin", "date": "2025-06-12", "guests": 60},
             "7 caterers: Grünzeug (veg buffet, 24 EUR pp), Kantine Nord (hot buffet, 29 EUR pp), ..."),
            ("Some attendees travel in from Hamburg; checking hotel rooms near the venue for the night of 11 June.",
             "search_hotels", {"near": "Invalidenstr. 44, Berlin", "checkin": "2025-06-11", "nights": 1},
             "18 hotels within 1 km: Hotel Lux 11 (129 EUR), Motel One Hauptbahnhof (99 EUR), ..."),
        ),
        tangential=(
            ("Having a look at Kesselhaus Mitte's public events programme.", "fetch_url",
             {"url": "https://kesselhaus-mitte.example/programm"},
             "June: 14.06 Jazz im Kessel, 21.06 Design Market, 28.06 Late-night cinema"),
            ("Reading an article on the best Berlin conference venues.", "web_search",
             {"query": "best conference venues Berlin ranking"},
             "'Berlin's 10 most striking event spaces' (2019): Tempelhof hangars, Kraftwerk, Radialsystem, ..."),
        ),
        unrelated=(
            ("Looking up the JPY to USD exchange rate.", "get_fx_rate", {"base": "JPY", "quote": "USD"},
             "1 JPY = 0.00667 USD (mid-market, 14:05 UTC)"),
            ("Reading a guide to keeping a sourdough starter alive.", "fetch_url",
             {"url": "https://bakery.example/sourdough-starter"},
             "Feed the starter equal weights of flour and water every 24 h; keep it at 24-26C."),
        ),
        lasting={
            "permission": ("Confirming the booking on quote Q-55817.", "book_venue", {"quote": "Q-55817"},
                           "ERROR: 403 Forbidden: user ops-assistant@halvorsen is not authorised to sign venue contracts "
                           "(requires role procurement_approver)"),
            "not_found": ("Pulling the details of Kesselhaus Mitte.", "get_venue_details", {"venue": "V-1187"},
                          "ERROR: 404 Not Found: venue V-1187 does not exist or was delisted"),
            "unsupported": ("Booking Kesselhaus Mitte.", "book_venue", {"quote": "Q-55817"},
                            "ERROR: online booking is not supported for this venue (enquiry-only listing)"),
        },
        transient=("Searching Berlin venues again.", "search_venues", {"city": "Berlin", "date": "2025-06-12"},
                   "ERROR: 429 Too Many Requests: rate limit exceeded, retry after 20 s"),
        poll=("Waiting for the venue to approve the provisional hold.", "get_hold_status", {"hold": "H-7720"},
              ("hold H-7720: PENDING venue approval", "hold H-7720: PENDING venue approval",
               "hold H-7720: APPROVED, quote Q-55817 issued")),
        page=("Going through more of the venue results.", "search_venues", {"city": "Berlin", "date": "2025-06-12"},
              ("page 1/3: V-2291 Spreeloft 3,200 EUR; V-1187 Kesselhaus Mitte 2,750 EUR",
               "page 2/3: V-3340 Atelier Kreuzberg 1,900 EUR; V-4418 Lichthof Moabit 3,900 EUR",
               "page 3/3: V-0912 Salon am Gendarmenmarkt 6,400 EUR; V-5003 Dachgarten Wedding 2,400 EUR")),
        cannot="My account is not authorised to sign venue contracts (it needs a procurement approver), so I cannot "
        "book the venue; someone with that role has to confirm quote Q-55817.",
        risk_tools={"search_venues": "read_only", "place_hold": "reversible", "book_venue": "irreversible",
                    "send_email": "irreversible", "pay_deposit": "regulated"},
    ),
    # ---------------------------------------------------------------- shipment rerouting (train, 3 steps)
    Domain(
        name="shipment_rerouting",
        split="train",
        goal="Shipment SHP-448102 is addressed to our Dallas warehouse, which is closed for repairs this week. "
        "Reroute it to the Fort Worth warehouse at 2400 Alta Mesa Blvd, Fort Worth TX 76134, and tell the Fort "
        "Worth receiving team (fw-receiving@brightlane.com) when to expect it.",
        criteria=(
            "shipment SHP-448102 rerouted to 2400 Alta Mesa Blvd, Fort Worth TX 76134",
            "the revised delivery date known",
            "the Fort Worth receiving team told when to expect it",
        ),
        steps=(
            ("Pulling up SHP-448102 to see where it is and what it carries.", "get_shipment", {"id": "SHP-448102"},
             "SHP-448102 (tracking 773044192285): IN_TRANSIT, last scan Memphis TN hub 2025-03-11 06:42. Consignee: "
             "Brightlane Dallas DC, 1450 Regal Row, Dallas TX 75247. 14 pallets, 6,820 kg, service Freight Priority."),
            ("Still at Memphis, not out for delivery, so a consignee change is possible. Submitting the reroute.",
             "request_reroute",
             {"shipment": "SHP-448102", "new_address": "2400 Alta Mesa Blvd, Fort Worth TX 76134",
              "reason": "consignee site closed"},
             "Reroute RR-90214 accepted for SHP-448102. New consignee: Brightlane Fort Worth DC, 2400 Alta Mesa Blvd, "
             "Fort Worth TX 76134. Revised ETA 2025-03-13 by 17:00 CT. Address correction fee 85.00 USD on account 44710."),
            ("Letting Fort Worth receiving know what is coming and when.", "send_message",
             {"to": "fw-receiving@brightlane.com", "subject": "Inbound SHP-448102: 14 pallets, ETA Thu 13 Mar by 17:00"},
             "Delivered to fw-receiving@brightlane.com (message id 0x7f2a91)."),
        ),
        final_good="SHP-448102 is rerouted (reroute RR-90214) from the closed Dallas DC to 2400 Alta Mesa Blvd, Fort "
        "Worth TX 76134; the revised ETA is 13 March 2025 by 17:00 CT (85 USD correction fee on account 44710). "
        "Fort Worth receiving was emailed the 14-pallet, 6,820 kg delivery and its ETA (message 0x7f2a91).",
        final_partial="SHP-448102 is still in Memphis and eligible for a consignee change, but I have not submitted "
        "the reroute to Fort Worth yet, and the receiving team has not been told anything.",
        final_claim="The shipment has been redirected and the warehouse is in the loop.",
        related=(
            ("Validating the Fort Worth address with the carrier before I redirect anything.", "validate_address",
             {"address": "2400 Alta Mesa Blvd, Fort Worth TX 76134"},
             "VALID: 2400 ALTA MESA BLVD, FORT WORTH TX 76134-2002; commercial; loading dock: yes"),
            ("Does Freight Priority even allow a consignee change mid-transit? Checking the service rules.",
             "get_service_rules", {"service": "Freight Priority"},
             "Freight Priority: consignee change allowed until out-for-delivery; fee 85 USD; not available for hazmat"),
        ),
        partly=(
            ("Other freight might be headed to Dallas too; listing inbound shipments for the Dallas DC this week.",
             "list_shipments", {"consignee": "Brightlane Dallas DC", "eta_from": "2025-03-10", "eta_to": "2025-03-16"},
             "3 inbound: SHP-448102 (Memphis), SHP-448377 (Oklahoma City, ETA 03-12), SHP-449010 (Houston, ETA 03-14)"),
            ("Switching the default ship-to on open purchase orders from Dallas to Fort Worth.", "update_po_shipto",
             {"supplier": "all", "from": "Dallas DC", "to": "Fort Worth DC"},
             "Ship-to updated on 5 open purchase orders: PO-7712, PO-7719, PO-7730, PO-7731, PO-7744"),
        ),
        tangential=(
            ("Pulling the carrier's quarterly on-time report for Texas lanes.", "get_carrier_report",
             {"carrier": "Ridgeway Freight", "region": "TX", "quarter": "2024-Q4"},
             "TX lanes Q4: on-time 91.4%, claims rate 0.6%, avg dwell at Memphis hub 7.2 h"),
            ("Searching reviews of roofing contractors that repair warehouses in Dallas.", "web_search",
             {"query": "commercial roof repair contractors Dallas reviews"},
             "Top rated: Lone Star Roofing (4.8), Trinity Commercial Roofs (4.6), ..."),
        ),
        unrelated=(
            ("Comparing prices for a standing desk.", "web_search", {"query": "standing desk under 500 dollars"},
             "Flexispot E7 449 USD, Uplift V2 599 USD, IKEA Mittzon 399 USD"),
            ("Summarising yesterday's all-hands notes.", "read_doc", {"name": "all-hands-2025-03-10"},
             "Q1 hiring on track; new expense tool from April; office closed on 18 April."),
        ),
        lasting={
            "permission": ("Submitting the reroute for SHP-448102.", "request_reroute", {"shipment": "SHP-448102"},
                           "ERROR: 403: API user api-ops on account 44710 lacks the shipment.modify permission; ask an "
                           "account administrator"),
            "not_found": ("Emailing Fort Worth receiving.", "send_message", {"to": "fw-receiving@brightlane.com"},
                          "ERROR: 550 5.1.1 recipient address rejected: fw-receiving@brightlane.com does not exist"),
            "unsupported": ("Submitting the reroute.", "request_reroute", {"shipment": "SHP-448102"},
                            "ERROR: consignee changes are not supported for consolidated linehaul shipments; only "
                            "return-to-sender is available"),
        },
        transient=("Submitting the reroute again.", "request_reroute", {"shipment": "SHP-448102"},
                   "ERROR: 504 Gateway Timeout from carrier API; request not processed, please retry"),
        poll=("Is the reroute applied at the hub yet?", "get_reroute_status", {"reroute": "RR-90214"},
              ("RR-90214: SUBMITTED, awaiting hub confirmation", "RR-90214: SUBMITTED, awaiting hub confirmation",
               "RR-90214: APPLIED at Memphis TN hub, new label printed 2025-03-11 09:18")),
        page=("Scrolling through the tracking history.", "get_tracking_events", {"tracking": "773044192285"},
              ("events 1-4: 03-08 picked up Louisville KY; 03-08 departed Louisville; 03-09 arrived Nashville TN; 03-09 departed",
               "events 5-8: 03-10 arrived Memphis TN hub; 03-10 sorted; 03-10 held for linehaul; 03-11 06:42 scanned",
               "events 9-10: 03-11 07:15 loaded to trailer TR-5521; 03-11 07:40 awaiting departure")),
        cannot="Our API user does not have permission to modify shipments on account 44710, so I cannot reroute "
        "SHP-448102; an account administrator needs to submit the change.",
        risk_tools={"get_shipment": "read_only", "request_reroute": "reversible", "send_message": "irreversible",
                    "cancel_shipment": "irreversible"},
    ),
    # ---------------------------------------------------------------- restaurant catering (test, 6 steps)
    Domain(
        name="restaurant_catering",
        split="test",
        goal="Order catering from Osteria Verde for the Tanaka Holdings client lunch on Thursday 20 March 2025: 24 "
        "people, of whom 3 vegetarian and 1 gluten-free, delivered to 88 Harbour Street, level 4, Sydney by 12:15, "
        "total under 900 AUD including delivery. Put the order number in the 'Client lunch - Tanaka Holdings' "
        "calendar event.",
        criteria=(
            "catering for 24 ordered from Osteria Verde, delivered to 88 Harbour Street level 4 by 12:15 on 20 March",
            "3 vegetarian and 1 gluten-free meals in the order",
            "total under 900 AUD including delivery",
            "the order number added to the calendar event",
        ),
        steps=(
            ("First, Osteria Verde's catering menu and prices.", "get_menu",
             {"restaurant_id": "ov-syd-02", "menu": "catering"},
             "Osteria Verde catering (per person unless noted): Pasta lunch box 28.00 AUD (classic or vegetarian; "
             "gluten-free +3.00); Antipasti platter serves 8 95.00; Tiramisu cup 6.00. Minimum order 300.00. CBD delivery 45.00."),
            ("Can they deliver to Harbour Street before 12:15 on the 20th?", "check_delivery_slot",
             {"restaurant_id": "ov-syd-02", "date": "2025-03-20", "arrive_by": "12:15",
              "address": "88 Harbour Street, Level 4, Sydney NSW 2000"},
             "Slot available: window 11:45-12:15, fee 45.00 AUD, driver delivers to level 4 reception"),
            ("Building the order: 20 classic boxes, 3 vegetarian, 1 gluten-free, and one antipasti platter.",
             "add_to_cart",
             {"restaurant_id": "ov-syd-02",
              "items": [["pasta_box_classic", 20], ["pasta_box_veg", 3], ["pasta_box_gf", 1], ["antipasti_8", 1]]},
             "Cart C-6631: 20 x Pasta box classic 560.00; 3 x Pasta box vegetarian 84.00; 1 x Pasta box gluten-free "
             "31.00; 1 x Antipasti platter 95.00. Subtotal 770.00 AUD."),
            ("Reviewing the cart total with delivery before paying.", "review_cart", {"cart": "C-6631"},
             "{\"cart\": \"C-6631\", \"meals\": 24, \"subtotal\": 770.00, \"delivery\": 45.00, \"total_aud\": 815.00, "
             "\"gst_included\": 74.09, \"window\": \"2025-03-20 11:45-12:15\"}"),
            ("815 AUD is within budget. Placing the order on the corporate card with the project PO.", "place_order",
             {"cart": "C-6631", "payment": "corporate card ****4417", "po": "KB-2025-0311",
              "notes": "label the vegetarian boxes V and pack the gluten-free box separately"},
             "Order OV-20250320-118 confirmed: 24 meals + antipasti platter, delivery 20 Mar 2025 11:45-12:15 to 88 "
             "Harbour Street level 4. Charged 815.00 AUD to card ****4417."),
            ("Adding the order number to the lunch event so everyone can see it.", "update_calendar_event",
             {"event": "Client lunch - Tanaka Holdings",
              "description_append": "Catering: Osteria Verde order OV-20250320-118, delivery 11:45-12:15"},
             "Event evt_3KQ9 'Client lunch - Tanaka Holdings' (Thu 20 Mar 12:30) updated; 24 attendees notified of the change."),
        ),
        final_good="Ordered catering from Osteria Verde: order OV-20250320-118, 24 pasta boxes (20 classic, 3 "
        "vegetarian, 1 gluten-free) plus an antipasti platter, delivered to 88 Harbour Street level 4 on 20 March "
        "between 11:45 and 12:15. Total 815.00 AUD including 45.00 delivery, under the 900 AUD budget, charged to "
        "card ****4417 under PO KB-2025-0311. The order number is in calendar event evt_3KQ9 'Client lunch - "
        "Tanaka Holdings'.",
        final_partial="I have Osteria Verde's catering menu and confirmed an 11:45-12:15 delivery slot to 88 Harbour "
        "Street on 20 March. The cart with the 3 vegetarian and 1 gluten-free boxes, the order itself and the "
        "calendar update are still to do.",
        final_claim="Lunch for Thursday is ordered and everything is in the calendar.",
        related=(
            ("Pulling the event RSVPs to confirm the head count and dietary needs.", "get_calendar_event",
             {"event": "Client lunch - Tanaka Holdings"},
             "evt_3KQ9: 24 accepted, 2 declined. Dietary notes: vegetarian (Okafor, Lind, Park), coeliac (Tanaka)"),
            ("Checking the building's rules for food deliveries to level 4.", "read_doc",
             {"name": "88 Harbour Street tenant handbook - deliveries"},
             "Deliveries before 13:00 via the Harbour St loading bay; couriers sign in at ground reception and are "
             "escorted to the tenant floor."),
        ),
        partly=(
            ("Booking the level 4 boardroom for the lunch itself.", "book_room",
             {"room": "L4 Boardroom", "date": "2025-03-20", "from": "12:00", "to": "14:00"},
             "L4 Boardroom (seats 26) booked 20 Mar 12:00-14:00, reservation RM-2207"),
            ("Ordering an afternoon coffee service for the visitors.", "order_supplies",
             {"supplier": "Bean Street Office Coffee", "item": "coffee service for 24", "date": "2025-03-20"},
             "Coffee service for 24 scheduled 20 Mar 14:30, quote 180.00 AUD, order BS-4471"),
        ),
        tangential=(
            ("Browsing Osteria Verde's evening wine list.", "fetch_url",
             {"url": "https://osteriaverde.example/vini"},
             "By the glass: Vermentino 14, Nero d'Avola 15; bottles from 62 AUD"),
            ("Looking up Tanaka Holdings' share price this morning.", "get_quote",
             {"ticker": "TNKH"}, "TNKH 1,842 JPY, +0.7% (Tokyo, close 15:00 JST)"),
        ),
        unrelated=(
            ("Renewing the car parking permit for the Pyrmont garage.", "renew_permit",
             {"permit": "PYR-0931", "months": 3}, "Permit PYR-0931 renewed until 2025-06-30"),
            ("Reading up on the rules of padel.", "web_search", {"query": "padel scoring rules"},
             "Padel is scored like tennis; serves are underarm and the ball may be played off the glass walls."),
        ),
        lasting={
            "permission": ("Placing the order for cart C-6631.", "place_order", {"cart": "C-6631"},
                           "ERROR: 403 Forbidden: user ea-assistant may not place orders above 500.00 AUD without a "
                           "cost-centre approver"),
            "not_found": ("Checking the delivery slot with Osteria Verde.", "check_delivery_slot",
                          {"restaurant_id": "ov-syd-02", "date": "2025-03-20"},
                          "ERROR: 404 restaurant ov-syd-02 not found"),
            "unsupported": ("Checking delivery to 88 Harbour Street.", "check_delivery_slot",
                            {"restaurant_id": "ov-syd-02", "address": "88 Harbour Street, Sydney NSW 2000"},
                            "ERROR: delivery to postcode 2000 is not supported for this restaurant's catering (pickup only)"),
        },
        transient=("Placing the order again.", "place_order", {"cart": "C-6631"},
                   "ERROR: 503 Service Unavailable: ordering is temporarily offline, try again in a few minutes"),
        poll=("Has the restaurant accepted the order?", "get_order_status", {"order": "OV-20250320-118"},
              ("OV-20250320-118: RECEIVED, awaiting restaurant acceptance",
               "OV-20250320-118: RECEIVED, awaiting restaurant acceptance",
               "OV-20250320-118: ACCEPTED by Osteria Verde, kitchen prep scheduled 10:30")),
        page=("Reading the rest of the catering menu.", "get_menu", {"restaurant_id": "ov-syd-02", "menu": "catering"},
              ("page 1 of 3 - lunch boxes: pasta classic 28.00, pasta vegetarian 28.00, gluten-free +3.00",
               "page 2 of 3 - platters: antipasti (8) 95.00, cheese board (10) 120.00, focaccia (12) 48.00",
               "page 3 of 3 - desserts and drinks: tiramisu cup 6.00, cannoli 5.50, San Pellegrino 4.00")),
        cannot="I am not allowed to place orders above 500 AUD without a cost-centre approver, so I cannot order the "
        "815 AUD catering myself; someone with approval rights has to submit cart C-6631.",
        risk_tools={"get_menu": "read_only", "add_to_cart": "reversible", "place_order": "regulated",
                    "update_calendar_event": "reversible", "cancel_order": "irreversible"},
    ),
    # ---------------------------------------------------------------- apartment rental listing (train, 4 steps)
    Domain(
        name="apartment_rental_listing",
        split="train",
        goal="Publish a rental listing on LocaPro for the two-bedroom flat at 17 Rue des Tanneurs, apt 3B, Lyon "
        "(property ref TAN-3B): 1,250 EUR a month plus 90 EUR charges, available from 1 September 2025, with the 12 "
        "photos in Drive/Listings/Tanneurs-3B/photos and the energy rating (DPE C).",
        criteria=(
            "the listing is live on LocaPro at 1,250 EUR rent plus 90 EUR charges, available 1 September 2025",
            "all 12 photos attached",
            "the DPE C energy rating shown",
        ),
        steps=(
            ("Listing the photo folder for Tanneurs 3B.", "list_files", {"folder": "Drive/Listings/Tanneurs-3B/photos"},
             "12 files: salon_01.jpg, salon_02.jpg, salon_03.jpg, cuisine_01.jpg, cuisine_02.jpg, chambre1_01.jpg, "
             "chambre1_02.jpg, chambre2_01.jpg, sdb_01.jpg, entree_01.jpg, balcon_01.jpg, facade_01.jpg (41.6 MB total)"),
            ("All 12 are there. Now the draft with rent, charges, date and the DPE.", "create_listing_draft",
             {"property": "TAN-3B", "type": "rental", "rent_eur": 1250, "charges_eur": 90,
              "available_from": "2025-09-01", "dpe": "C"},
             "Draft LP-77420 created: T3, 64 m2, 17 Rue des Tanneurs 3B, 69001 Lyon. Rent 1,250 EUR + 90 EUR "
             "charges. Available 2025-09-01. DPE C (142 kWh/m2/yr), GES C."),
            ("Uploading the photos to draft LP-77420, living room first as the cover.", "upload_photos",
             {"listing": "LP-77420", "folder": "Drive/Listings/Tanneurs-3B/photos", "cover": "salon_01.jpg"},
             "12/12 photos uploaded to LP-77420; cover image salon_01.jpg"),
            ("Draft is complete; publishing it.", "publish_listing", {"listing": "LP-77420"},
             "LP-77420 published: status LIVE, https://locapro.example/annonce/77420 (visible since 10:02)"),
        ),
        final_good="The listing is live on LocaPro as LP-77420 (https://locapro.example/annonce/77420): T3 at 17 Rue "
        "des Tanneurs 3B, Lyon, 1,250 EUR a month + 90 EUR charges, available 1 September 2025, DPE C (142 "
        "kWh/m2/yr) shown, and all 12 photos uploaded with salon_01.jpg as the cover.",
        final_partial="Draft LP-77420 exists with the rent (1,250 + 90 EUR charges), 1 September availability and "
        "DPE C, but the 12 photos are not uploaded yet and the listing is not published.",
        final_claim="The apartment is listed and ready for viewings.",
        related=(
            ("Opening the DPE certificate to get the exact energy figures for the listing.", "read_file",
             {"path": "Drive/Listings/Tanneurs-3B/DPE_Tanneurs_3B.pdf"},
             "DPE issued 2023-04-11: class C, 142 kWh/m2/yr; GES C, 19 kg CO2/m2/yr; valid until 2033-04-10"),
            ("Checking the Carrez floor area in the property file, since the portal requires it.", "get_property",
             {"ref": "TAN-3B"},
             "TAN-3B: 17 Rue des Tanneurs, 3rd floor, apt 3B; T3; surface Carrez 64.2 m2; owner M. Bertrand"),
        ),
        partly=(
            ("Opening viewing slots for the first week of August.", "create_viewing_slots",
             {"property": "TAN-3B", "from": "2025-08-04", "to": "2025-08-08", "slot_minutes": 30},
             "20 viewing slots created (Mon-Fri 17:30-19:30)"),
            ("Setting up an automatic reply for enquiries about the flat.", "set_autoreply",
             {"listing_ref": "TAN-3B", "message": "Thanks for your interest, please book a viewing slot."},
             "Auto-reply enabled for enquiries tagged TAN-3B"),
        ),
        tangential=(
            ("Browsing other flats for rent on Rue des Tanneurs.", "search_listings",
             {"city": "Lyon", "street": "Rue des Tanneurs", "type": "rental"},
             "2 results: studio 24 m2 620 EUR; T2 41 m2 890 EUR"),
            ("Checking what T3 flats in Lyon 1er are selling for.", "get_market_prices",
             {"area": "Lyon 1er", "type": "T3", "transaction": "sale"},
             "Median sale price T3 Lyon 1er: 5,340 EUR/m2 (Q2 2025), +1.2% over a year"),
        ),
        unrelated=(
            ("Looking up last night's rugby result.", "web_search", {"query": "Top 14 result last night"},
             "Toulouse 31 - 17 Clermont"),
            ("Transcribing a podcast episode.", "transcribe_audio", {"file": "podcast_ep42.mp3"},
             "Transcript ready: 38 min, 5,912 words"),
        ),
        lasting={
            "permission": ("Publishing draft LP-77420.", "publish_listing", {"listing": "LP-77420"},
                           "ERROR: 403 Forbidden: role 'assistant' cannot publish listings on agency account "
                           "IMMO-SAONE (publishing requires agent or admin)"),
            "not_found": ("Creating the draft for TAN-3B.", "create_listing_draft", {"property": "TAN-3B"},
                          "ERROR: property reference TAN-3B not found in the agency portfolio"),
            "unsupported": ("Creating the rental draft.", "create_listing_draft", {"property": "TAN-3B", "type": "rental"},
                            "ERROR: listing type 'rental' is not supported by this API version (sale listings only)"),
        },
        transient=("Uploading the photos again.", "upload_photos", {"listing": "LP-77420"},
                   "ERROR: upload timed out after 120 s (connection reset by peer); nothing was saved, retry"),
        poll=("Are the photo thumbnails processed?", "get_upload_job", {"job": "UJ-5531"},
              ("UJ-5531: PROCESSING 7/12 thumbnails", "UJ-5531: PROCESSING 7/12 thumbnails",
               "UJ-5531: DONE 12/12 thumbnails")),
        page=("Listing the folder page by page.", "list_files", {"folder": "Drive/Listings/Tanneurs-3B/photos"},
              ("page 1: salon_01.jpg, salon_02.jpg, salon_03.jpg, cuisine_01.jpg",
               "page 2: cuisine_02.jpg, chambre1_01.jpg, chambre1_02.jpg, chambre2_01.jpg",
               "page 3: sdb_01.jpg, entree_01.jpg, balcon_01.jpg, facade_01.jpg")),
        cannot="My role on the IMMO-SAONE agency account cannot publish listings, so I cannot put the Tanneurs 3B "
        "flat online; an agent or admin has to publish draft LP-77420.",
        risk_tools={"list_files": "read_only", "create_listing_draft": "reversible", "publish_listing": "reversible",
                    "delete_listing": "irreversible", "run_tenant_credit_check": "regulated"},
    ),
)  # fmt: skip
