# ruff: noqa: E501  (data: long literal lines read better unbroken)
"""Scripted trajectories for the development set: education and publishing tasks, written for stopwise (own work, Apache-2.0).

Four domains in the format of ``_trajectories.py``: enrolling a student in a course section, translating an app's
new strings into German, submitting a paper to a conference, and publishing an end-of-term grade report. Each is
a task (goal, acceptance criteria), the on-goal steps that solve it in order, pools of steps that do something
else (related, partly related, tangential, unrelated), errors that last and that pass, a polled job, a paged list,
and final answers that are complete, partial or claimed without evidence. A step is ``(agent text, tool, args,
result)``; a result starting with ``ERROR:`` is a failed call.
"""

from __future__ import annotations

from _domain import Domain

DOMAINS: tuple[Domain, ...] = (
    Domain(
        name="course_enrollment",
        split="test",
        goal="Enroll student Tomasz Wierzbicki (id S2041187) in CS 340 Operating Systems, section 002 (Tue/Thu "
        "10:00), for Fall 2025, after confirming he has the CS 220 prerequisite and no timetable clash, then email "
        "him the enrollment confirmation.",
        criteria=(
            "the CS 220 prerequisite is confirmed on his transcript",
            "he is enrolled in CS 340 section 002 for Fall 2025 with no timetable conflict",
            "the enrollment confirmation is emailed to the student",
        ),
        steps=(
            ("Prerequisite first: pulling Tomasz's transcript to see whether CS 220 is there with a passing grade.",
             "get_transcript", {"student_id": "S2041187"},
             "S2041187 Wierzbicki, Tomasz | BSc Computer Science | CS 101 A (2023FA); MATH 150 B+ (2023FA); "
             "CS 220 Computer Systems B (2024SP); MATH 231 A- (2024SP); CS 250 B+ (2024FA) | cumulative GPA 3.41"),
            ("CS 220 passed with a B, above the C minimum. Now the Fall 2025 sections of CS 340.", "search_sections",
             {"course": "CS 340", "term": "2025FA"},
             "CS 340 Operating Systems, 2025FA, 4 cr:\n  001 CRN 48212 MWF 09:00-09:50 Okafor  seats 0/120 (waitlist 14)\n"
             "  002 CRN 48213 TR 10:00-11:15 Lindqvist  seats 7/90 open\n  003 CRN 48214 TR 16:00-17:15 Lindqvist  seats 22/60 open"),
            ("Section 002 (CRN 48213) still has 7 open seats. Before registering, I'll run it against his current "
             "Fall schedule for clashes.", "check_schedule_conflicts",
             {"student_id": "S2041187", "term": "2025FA", "crn": 48213},
             "{\"crn\": 48213, \"conflicts\": [], \"current_schedule\": [\"MATH 310-001 MWF 11:00-11:50\", "
             "\"CS 350-001 TR 13:00-14:15\", \"HIST 205-004 W 18:00-20:30\"]}"),
            ("No conflicts. Registering him in CS 340-002.", "enroll_student",
             {"student_id": "S2041187", "term": "2025FA", "crn": 48213},
             "Enrollment confirmed: S2041187 added to CS 340-002 (CRN 48213), 2025FA, 4 credits. Term total 13 "
             "credits. Confirmation no. ENR-2025-77410."),
            ("Sending Tomasz the confirmation with the CRN and confirmation number.", "send_email",
             {"to": "t.wierzbicki@students.example.edu",
              "subject": "Enrolled: CS 340-002 Operating Systems, Fall 2025 (ENR-2025-77410)"},
             "Message queued for delivery to t.wierzbicki@students.example.edu (id msg-3f9a12)."),
        ),
        final_good="Tomasz Wierzbicki (S2041187) is enrolled in CS 340 Operating Systems section 002, CRN 48213, "
        "Tue/Thu 10:00-11:15, Fall 2025 (confirmation ENR-2025-77410, 13 credits for the term). His transcript "
        "shows CS 220 passed with a B (minimum C), the schedule check found no conflicts with MATH 310, CS 350 or "
        "HIST 205, and the confirmation was emailed to t.wierzbicki@students.example.edu.",
        final_partial="The CS 220 prerequisite is satisfied (grade B) and section 002 (CRN 48213) has 7 open seats. "
        "Still to do: check his Fall timetable for clashes, register him in the section and email him the "
        "confirmation.",
        final_claim="Done! Tomasz is all set for Operating Systems this fall.",
        related=(
            ("Making sure there are no registration holds on his account that would block enrollment.",
             "get_student_record", {"student_id": "S2041187"},
             "S2041187 Wierzbicki, Tomasz | status: active | class: junior | holds: none | advisor: Dr. M. Achebe"),
            ("Confirming his registration window for Fall 2025 is open.", "get_registration_window",
             {"student_id": "S2041187", "term": "2025FA"},
             "Time ticket 2025FA: opened 2025-04-14 08:00, closes 2025-08-29 23:59. Status: OPEN."),
        ),
        partly=(
            ("Looking up the required textbook for CS 340-002 so he can order it ahead of time.",
             "get_course_materials", {"crn": 48213},
             "CS 340-002 materials: Arpaci-Dusseau, Operating Systems: Three Easy Pieces (free online); "
             "Silberschatz et al., Operating System Concepts 10e (recommended, bookstore 89.95 USD)"),
            ("Running a degree audit to see which requirement CS 340 will count toward.", "run_degree_audit",
             {"student_id": "S2041187", "program": "BSCS"},
             "Degree audit BSCS: Systems core 1 of 2 remaining (CS 340 eligible); electives 12/18 cr; "
             "expected graduation 2026SP"),
        ),
        tangential=(
            ("Pulling CS 340 enrollment numbers from previous years.", "get_enrollment_stats",
             {"course": "CS 340", "terms": ["2022FA", "2023FA", "2024FA"]},
             "CS 340 fall enrollment: 2022FA 212, 2023FA 241, 2024FA 268; average fill rate 97%"),
            ("Reading up on how operating systems schedule processes.", "web_search",
             {"query": "operating system process scheduling round robin vs CFS"},
             "Linux's Completely Fair Scheduler tracks virtual runtime per task in a red-black tree; round robin "
             "gives each process a fixed time slice."),
        ),
        unrelated=(
            ("Checking the tide times at Half Moon Bay for the weekend.", "web_search",
             {"query": "Half Moon Bay tide chart saturday"},
             "Saturday: high tide 06:42 (5.1 ft), low tide 13:05 (0.4 ft)."),
            ("Searching listings for a used road bike under 600 USD.", "search_marketplace",
             {"query": "road bike 56cm", "max_price": 600},
             "14 listings: Trek Domane AL2 480 USD; Giant Contend 1 550 USD; Specialized Allez 420 USD ..."),
        ),
        lasting={
            "permission": ("Registering him in CS 340-002.", "enroll_student",
                           {"student_id": "S2041187", "term": "2025FA", "crn": 48213},
                           "ERROR: 403 Forbidden: role advisor_readonly cannot modify registrations "
                           "(requires registrar_staff)"),
            "not_found": ("Looking up the Fall 2025 sections of CS 340.", "search_sections",
                          {"course": "CS 340", "term": "2025FA"},
                          "ERROR: term 2025FA has no course matching 'CS 340' in the schedule of classes"),
            "unsupported": ("Enrolling Tomasz in CRN 48213.", "enroll_student",
                            {"student_id": "S2041187", "term": "2025FA", "crn": 48213},
                            "ERROR: CRN 48213 is cross-listed with ECE 344; enrollment in cross-listed sections is "
                            "not supported by this API"),
        },
        transient=("Trying the registration for CRN 48213.", "enroll_student",
                   {"student_id": "S2041187", "term": "2025FA", "crn": 48213},
                   "ERROR: 429 Too Many Requests: registration is under peak load, retry after 30 seconds"),
        poll=("Waiting on the queued registration request to be processed.", "get_registration_request",
              {"request": "REG-90233"},
              ("REG-90233: QUEUED (position 312)", "REG-90233: QUEUED (position 312)",
               "REG-90233: PROCESSED, CRN 48213 registered")),
        page=("Going through the Fall 2025 CS section list.", "list_course_sections",
              {"subject": "CS", "term": "2025FA", "level": 300},
              ("CS 301-001 CRN 48190 MWF 10:00; CS 310-001 CRN 48201 TR 08:30; CS 320-001 CRN 48205 MW 14:00",
               "CS 340-001 CRN 48212 MWF 09:00; CS 340-002 CRN 48213 TR 10:00; CS 340-003 CRN 48214 TR 16:00",
               "CS 350-001 CRN 48220 TR 13:00; CS 361-001 CRN 48226 MWF 13:00; CS 375-001 CRN 48231 W 18:00")),
        cannot="My account only has read-only advisor access, so I can't register Tomasz in CS 340-002 myself; "
        "someone with registrar staff permissions will need to enroll him.",
        risk_tools={"search_sections": "read_only", "enroll_student": "reversible", "send_email": "irreversible",
                    "release_transcript": "regulated"},
    ),
    Domain(
        name="app_localization",
        split="train",
        goal="Translate the 38 new English strings of the Tidewater iOS app for release 4.2 into German using the "
        "tidewater-de-v3 glossary, validate placeholders and plural forms, and commit the German strings to "
        "branch release/4.2.",
        criteria=(
            "all 38 missing German strings are translated with the glossary applied",
            "the German strings pass the placeholder and plural checks",
            "the German strings are committed to release/4.2 with full de coverage",
        ),
        steps=(
            ("Which keys are missing for de on release/4.2?", "list_untranslated_strings",
             {"project": "tidewater-ios", "branch": "release/4.2", "locale": "de"},
             "38 keys untranslated for de (1,176/1,214 done): onboarding.welcome_title, onboarding.skip, "
             "paywall.trial_cta, paywall.restore, settings.export_csv, tides.next_high_%@, ... (source: en)"),
            ("Drafting German translations for those 38 keys with the glossary applied.", "machine_translate",
             {"project": "tidewater-ios", "keys": "missing:de", "source": "en", "target": "de",
              "glossary": "tidewater-de-v3"},
             "Job mt-5521 finished: 38 drafts written to locale de; glossary terms applied in 11 strings "
             "('tide chart' -> 'Gezeitenkalender', 'trial' -> 'Testzeitraum')."),
            ("Drafts are in. Running the string linter over de before anything gets committed.", "lint_strings",
             {"project": "tidewater-ios", "locale": "de", "checks": ["placeholders", "plurals", "length"]},
             "de: 38 strings checked. placeholders: 0 mismatches; plurals: one/other present for 4 keys; "
             "length: 0 over limit. PASS"),
            ("Lint is clean, committing Localizable.xcstrings to release/4.2.", "commit_strings",
             {"project": "tidewater-ios", "branch": "release/4.2", "locale": "de",
              "message": "Add German strings for 4.2"},
             "Committed 9f3e1a2 to release/4.2: Localizable.xcstrings (+38 de). de coverage 1,214/1,214 (100%)."),
        ),
        final_good="The 38 new strings of release 4.2 are translated into German (job mt-5521, glossary "
        "tidewater-de-v3 applied in 11 strings), the linter passed with 0 placeholder mismatches, plural forms "
        "one/other for the 4 plural keys and nothing over length, and commit 9f3e1a2 on release/4.2 brings de "
        "coverage to 1,214/1,214.",
        final_partial="German drafts for the 38 missing keys exist (job mt-5521, glossary applied), but they have "
        "not been run through the placeholder/plural checks yet and nothing is committed to release/4.2.",
        final_claim="German localization for 4.2 is finished and in the branch.",
        related=(
            ("Pulling the glossary so the key product terms stay consistent.", "get_glossary",
             {"name": "tidewater-de-v3"},
             "tidewater-de-v3: 212 terms, formal address (Sie). tide chart -> Gezeitenkalender; trial -> "
             "Testzeitraum; high tide -> Hochwasser; export -> exportieren"),
            ("paywall.trial_cta is a button; checking its context and length limit.", "get_string_context",
             {"project": "tidewater-ios", "key": "paywall.trial_cta"},
             "paywall.trial_cta: UIButton title, max 32 chars, screenshot paywall_03.png, comment: 'Starts the "
             "7-day free trial'"),
        ),
        partly=(
            ("Translating the 4.2 App Store release notes into German as well.", "machine_translate",
             {"project": "tidewater-appstore", "keys": "whats_new_4_2", "source": "en", "target": "de"},
             "Job mt-5524 finished: 1 draft (412 characters) written to locale de."),
            ("Checking whether de-AT needs any overrides for the new strings.", "list_untranslated_strings",
             {"project": "tidewater-ios", "branch": "release/4.2", "locale": "de-AT"},
             "de-AT falls back to de; 0 keys untranslated, 3 overrides defined (Jänner, Paradeiser, Sackerl)."),
        ),
        tangential=(
            ("Looking at how large the German user base is.", "query_analytics",
             {"metric": "active_users", "group_by": "locale", "days": 30},
             "Active users, last 30 days: en 142,880; de 18,420; fr 9,310; es 7,760; ja 4,105"),
            ("Reading the latest German App Store reviews.", "list_app_reviews",
             {"app": "tidewater-ios", "storefront": "DE", "limit": 3},
             "4.6 stars (2,311 ratings). 'Super für Segler' 5*; 'Widget lädt manchmal nicht' 3*; "
             "'Übersetzung teilweise holprig' 4*"),
        ),
        unrelated=(
            ("Checking whether flight LH 454 is on time.", "get_flight_status", {"flight": "LH454", "date": "today"},
             "LH 454 FRA-SFO: scheduled 10:05, estimated 10:40, gate Z25."),
            ("Looking up the Bundesliga table.", "web_search", {"query": "Bundesliga Tabelle aktuell"},
             "1. Bayern 58 pts, 2. Leverkusen 51 pts, 3. Frankfurt 45 pts."),
        ),
        lasting={
            "permission": ("Committing the German strings to release/4.2.", "commit_strings",
                           {"project": "tidewater-ios", "branch": "release/4.2", "locale": "de"},
                           "ERROR: 403: branch release/4.2 is protected; user loc-bot needs the Maintainer role to push"),
            "not_found": ("Listing untranslated de keys on release/4.2.", "list_untranslated_strings",
                          {"project": "tidewater-ios", "branch": "release/4.2", "locale": "de"},
                          "ERROR: 404 branch 'release/4.2' not found in project tidewater-ios"),
            "unsupported": ("Machine-translating the missing keys into German.", "machine_translate",
                            {"project": "tidewater-ios", "keys": "missing:de", "target": "de"},
                            "ERROR: glossary-constrained translation is not supported for target 'de' on plan "
                            "Starter (supported: en, es, fr)"),
        },
        transient=("Re-running the translation job.", "machine_translate",
                   {"project": "tidewater-ios", "keys": "missing:de", "target": "de"},
                   "ERROR: 503 Service Unavailable: translation engine overloaded, retry in 60 s"),
        poll=("Is the translation job done yet?", "get_job", {"job": "mt-5521"},
              ("mt-5521: running, 21/38 strings", "mt-5521: running, 21/38 strings",
               "mt-5521: completed, 38/38 strings")),
        page=("Paging through the untranslated keys.", "list_strings",
              {"project": "tidewater-ios", "locale": "de", "filter": "untranslated"},
              ("keys 1-13: onboarding.welcome_title, onboarding.subtitle, onboarding.skip, paywall.trial_cta ...",
               "keys 14-26: settings.export_csv, settings.units_metric, tides.next_high_%@, tides.next_low_%@ ...",
               "keys 27-38: widget.small_title, widget.configure, alerts.storm_warning, alerts.dismiss ...")),
        cannot="release/4.2 is a protected branch and the loc-bot account has no Maintainer rights, so I cannot "
        "commit the German strings there; a maintainer will have to push them.",
        risk_tools={"list_untranslated_strings": "read_only", "machine_translate": "reversible",
                    "commit_strings": "reversible", "submit_app_store_build": "irreversible"},
    ),
    Domain(
        name="conference_paper_submission",
        split="test",
        goal="Submit the paper 'Sparse Adapters for Low-Resource Speech Recognition' (papers/sparse-adapters.pdf) "
        "to the Interspeech 2025 main track before the 12 February 23:59 AoE deadline, with all four authors "
        "(A. Novak, L. Chen, R. Haddad, M. Osei) and an anonymised PDF of at most 4 pages plus 1 page of "
        "references, then send the submission id to the co-authors.",
        criteria=(
            "the PDF is anonymised and within 4 pages plus 1 page of references",
            "a submission with all four authors and the PDF is finalised before the deadline",
            "the co-authors receive the submission id",
        ),
        steps=(
            ("Confirming the track is still open and the page rules.", "get_call_details",
             {"venue": "INTERSPEECH2025", "track": "main"},
             "INTERSPEECH2025 / main: status OPEN. Paper deadline 2025-02-12 23:59 AoE (update deadline "
             "2025-02-19). Limits: 4 pages content + 1 page references/acknowledgements; double-blind."),
            ("Running the template and anonymity check on the PDF.", "check_pdf_format",
             {"file": "papers/sparse-adapters.pdf", "template": "interspeech2025"},
             "sparse-adapters.pdf: 5 pages (4 content + 1 references), A4, all fonts embedded, template OK. "
             "Anonymity: no author names or affiliations in text or PDF metadata."),
            ("PDF is compliant. Creating the submission entry with the four authors and the abstract.",
             "create_submission",
             {"venue": "INTERSPEECH2025", "track": "main",
              "title": "Sparse Adapters for Low-Resource Speech Recognition",
              "authors": ["A. Novak", "L. Chen", "R. Haddad", "M. Osei"], "area": "ASR"},
             "Submission #1847 created (DRAFT). Authors: Novak (contact), Chen, Haddad, Osei. Area: 5.2 "
             "Low-resource ASR. Abstract 187 words."),
            ("Attaching the paper PDF to #1847.", "upload_file",
             {"submission": 1847, "file": "papers/sparse-adapters.pdf", "kind": "paper"},
             "Uploaded paper.pdf to #1847 (1.8 MB, 5 pages, sha256 3b9f0e...c21)."),
            ("Everything is attached; finalising #1847.", "finalize_submission", {"submission": 1847},
             "Submission #1847 status: SUBMITTED at 2025-02-10 14:12 UTC. Confirmation sent to "
             "a.novak@uni-example.edu."),
            ("Letting the co-authors know the id.", "send_email",
             {"to": ["l.chen@uni-example.edu", "r.haddad@lab-example.org", "m.osei@uni-example.edu"],
              "subject": "Interspeech 2025: paper submitted as #1847"},
             "Sent to 3 recipients, message id <c81f2a@mail.uni-example.edu>."),
        ),
        final_good="'Sparse Adapters for Low-Resource Speech Recognition' is submitted to Interspeech 2025 main "
        "track as #1847, status SUBMITTED on 2025-02-10 14:12 UTC, before the 12 February AoE deadline. The PDF "
        "passed the template and anonymity check (4 content pages + 1 references, no names in text or metadata), "
        "all four authors (Novak, Chen, Haddad, Osei) are listed, and Chen, Haddad and Osei were emailed the "
        "submission id.",
        final_partial="The PDF passes the format and anonymity check and draft submission #1847 exists with all "
        "four authors, but the PDF is not uploaded yet, the submission is not finalised, and the co-authors have "
        "not been sent the id.",
        final_claim="The paper has been submitted successfully, nothing left to do before the deadline.",
        related=(
            ("Checking that every co-author's profile has conflicts filled in, since the system requires it.",
             "get_author_profile", {"email": "r.haddad@lab-example.org"},
             "R. Haddad, Lab Example Speech Group. Profile complete: ORCID 0000-0002-4471-9902, 3 conflict domains."),
            ("Re-reading the double-blind policy on self-citation.", "read_doc",
             {"venue": "INTERSPEECH2025", "doc": "anonymity-policy"},
             "Cite your own prior work in the third person. Do not link to non-anonymous repositories. "
             "Preprints are allowed but must not be referenced as yours."),
        ),
        partly=(
            ("Checking early registration fees in case the paper gets in.", "get_call_details",
             {"venue": "INTERSPEECH2025", "section": "registration"},
             "Early registration until 2025-06-20: 650 EUR (ISCA member), 325 EUR (student member)."),
            ("Looking into the student travel grant for Chen and Osei.", "read_doc",
             {"venue": "INTERSPEECH2025", "doc": "travel-grants"},
             "ISCA travel grants: applications open after acceptance notification; deadline 2025-06-01."),
        ),
        tangential=(
            ("Searching for other recent papers on adapters for speech recognition.", "search_papers",
             {"query": "adapters low-resource speech recognition 2024"},
             "6 results: 'Efficient Adapter Tuning for Multilingual ASR' (2024); 'LoRA for Whisper' (2024); ..."),
            ("Looking at the Interspeech 2024 acceptance rate.", "web_search",
             {"query": "Interspeech 2024 acceptance rate"},
             "Interspeech 2024 accepted about 1,240 of 2,630 submissions (roughly 47%)."),
        ),
        unrelated=(
            ("Tracking a parcel from the online bookshop.", "track_parcel", {"tracking": "JD014600003GB"},
             "JD014600003GB: out for delivery, expected by 18:00."),
            ("Looking up how to repot a fiddle leaf fig.", "web_search", {"query": "repot fiddle leaf fig when"},
             "Repot in spring into a pot 5 cm wider, with fast-draining soil."),
        ),
        lasting={
            "permission": ("Finalising submission #1847.", "finalize_submission", {"submission": 1847},
                           "ERROR: 403 Forbidden: only the contact author (a.novak@uni-example.edu) can finalise "
                           "#1847; this account has view rights"),
            "not_found": ("Creating the submission.", "create_submission",
                          {"venue": "INTERSPEECH2025", "track": "main"},
                          "ERROR: 404 venue INTERSPEECH2025/main not found"),
            "unsupported": ("Uploading the PDF to #1847.", "upload_file",
                            {"submission": 1847, "file": "papers/sparse-adapters.pdf", "kind": "paper"},
                            "ERROR: file upload is not supported through the API for this venue; use the web form"),
        },
        transient=("Uploading the PDF again.", "upload_file",
                   {"submission": 1847, "file": "papers/sparse-adapters.pdf", "kind": "paper"},
                   "ERROR: 504 Gateway Timeout: submission server under heavy load near the deadline, try again shortly"),
        poll=("Waiting for the portal's automatic compliance check on #1847.", "get_submission", {"id": 1847},
              ("#1847 compliance check: queued", "#1847 compliance check: queued",
               "#1847 compliance check: passed (page limit, margins, anonymity)")),
        page=("Scrolling through the subject areas to pick the right one.", "list_subject_areas",
              {"venue": "INTERSPEECH2025"},
              ("1.1 Speech perception; 1.2 Phonetics; 2.1 Speech production; 3.1 Paralinguistics ...",
               "4.1 Speech synthesis; 4.2 Voice conversion; 5.1 ASR architectures; 5.2 Low-resource ASR ...",
               "6.1 Speaker recognition; 7.1 Spoken dialogue; 8.1 Speech enhancement; 9.1 Resources ...")),
        cannot="This account only has view rights on #1847 and the portal lets just the contact author "
        "(A. Novak) finalise it, so I can't complete the submission; Novak needs to press submit.",
        risk_tools={"check_pdf_format": "read_only", "upload_file": "reversible",
                    "finalize_submission": "irreversible", "send_email": "irreversible",
                    "withdraw_submission": "irreversible"},
    ),
    Domain(
        name="grade_report",
        split="train",
        goal="Produce the Autumn 2024 end-of-term report for class 8B Mathematics: compute each of the 27 students' "
        "final grade as 40% coursework plus 60% exam and publish the report to the parent portal.",
        criteria=(
            "coursework and exam scores are present for all 27 students",
            "final grades are computed with the 40/60 weighting",
            "the report is published to the parent portal",
        ),
        steps=(
            ("Opening the 8B maths gradebook for Autumn 2024.", "get_gradebook",
             {"class": "8B-MATH", "term": "2024-AUT"},
             "8B-MATH 2024-AUT (J. Whitfield): 27 students. Columns: coursework (avg 72.8), exam (avg 70.5). "
             "Missing entries: 0."),
            ("All 27 have both marks, so applying 40% coursework / 60% exam.", "compute_final_grades",
             {"class": "8B-MATH", "term": "2024-AUT", "weights": {"coursework": 0.4, "exam": 0.6}},
             "Final grades for 27 students: mean 71.4, median 73. Bands: A 6, B 9, C 8, D 3, E 1. "
             "Saved as draft report RPT-8B-2024AUT v1."),
            ("Publishing RPT-8B-2024AUT to parents.", "publish_report",
             {"report": "RPT-8B-2024AUT", "audience": "parents"},
             "RPT-8B-2024AUT published to the parent portal at 2024-12-18 16:05: 27 student reports, "
             "49 guardians notified."),
        ),
        final_good="Class 8B Mathematics, Autumn 2024: the gradebook had coursework and exam marks for all 27 "
        "students (0 missing); final grades computed at 40% coursework + 60% exam (mean 71.4, median 73; A 6, "
        "B 9, C 8, D 3, E 1); report RPT-8B-2024AUT published to the parent portal on 2024-12-18 with 27 student "
        "reports and 49 guardians notified.",
        final_partial="I've checked the 8B gradebook: all 27 students have coursework and exam marks. The final "
        "grades still need computing with the 40/60 weighting, and nothing has been published to parents yet.",
        final_claim="The 8B report is done and parents can see it.",
        related=(
            ("Checking the assessment policy for rounding and grade boundaries.", "read_doc",
             {"name": "ks3-assessment-policy"},
             "Final percentages round half up to a whole number. Bands: A >= 80, B >= 70, C >= 60, D >= 50, E < 50."),
            ("Making sure the exam marks have been moderated before they go into the grades.",
             "get_moderation_status", {"class": "8B-MATH", "assessment": "autumn-exam"},
             "8B-MATH autumn-exam: moderation complete (6 scripts sampled), adjustment 0 marks."),
        ),
        partly=(
            ("Generating first-draft teacher comments for each student.", "draft_comments",
             {"class": "8B-MATH", "term": "2024-AUT", "bank": "maths-ks3"},
             "27 comment drafts created from bank maths-ks3; 4 flagged for teacher review."),
            ("Comparing 8B with the other Year 8 sets.", "compare_classes",
             {"classes": ["8A-MATH", "8B-MATH", "8C-MATH"], "term": "2024-AUT"},
             "Mean final %: 8A 68.9, 8B 71.4, 8C 64.2"),
        ),
        tangential=(
            ("Looking at 8B's attendance this term.", "get_attendance", {"class": "8B", "term": "2024-AUT"},
             "8B attendance 2024-AUT: 95.2% overall; 3 students below 90%."),
            ("Reading the Year 8 maths scheme of work for spring.", "read_doc", {"name": "y8-maths-scheme-spring"},
             "Spring units: algebraic fractions, Pythagoras' theorem, probability of combined events."),
        ),
        unrelated=(
            ("Checking Saturday trains to Manchester.", "search_trains",
             {"from": "Leeds", "to": "Manchester Piccadilly", "date": "2024-12-21"},
             "09:12 -> 10:05, 09:42 -> 10:38, 10:12 -> 11:05; off-peak return 14.80 GBP."),
            ("Finding a birthday present for a 10-year-old.", "web_search", {"query": "gift ideas 10 year old science"},
             "Crystal growing kit, snap circuits set, beginner telescope."),
        ),
        lasting={
            "permission": ("Publishing the report to the parent portal.", "publish_report",
                           {"report": "RPT-8B-2024AUT", "audience": "parents"},
                           "ERROR: 403: publishing to parents requires head-of-department sign-off; account "
                           "j.whitfield has role teacher"),
            "not_found": ("Opening the gradebook.", "get_gradebook", {"class": "8B-MATH", "term": "2024-AUT"},
                          "ERROR: no gradebook for class '8B-MATH' in term 2024-AUT"),
            "unsupported": ("Computing final grades with the 40/60 split.", "compute_final_grades",
                            {"class": "8B-MATH", "weights": {"coursework": 0.4, "exam": 0.6}},
                            "ERROR: custom weights are not supported: gradebook template KS3-standard is locked "
                            "to 50/50"),
        },
        transient=("Computing the grades.", "compute_final_grades",
                   {"class": "8B-MATH", "weights": {"coursework": 0.4, "exam": 0.6}},
                   "ERROR: request timed out after 30 s (gradebook service busy at end of term); please retry"),
        poll=("The PDFs are rendering; checking on them.", "get_report", {"id": "RPT-8B-2024AUT"},
              ("RPT-8B-2024AUT: rendering PDFs 12/27", "RPT-8B-2024AUT: rendering PDFs 12/27",
               "RPT-8B-2024AUT: ready, 27/27 PDFs")),
        page=("Reading the class list with marks, page by page.", "list_students", {"class": "8B-MATH"},
              ("1-10: Adeyemi T. CW 78 EX 81; Barker L. CW 64 EX 59; Chowdhury S. CW 88 EX 92 ...",
               "11-20: Jones E. CW 70 EX 66; Kowalski P. CW 55 EX 48; Li W. CW 91 EX 87 ...",
               "21-27: Patel R. CW 73 EX 77; Shaw D. CW 62 EX 70; Wright O. CW 80 EX 74")),
        cannot="Publishing to the parent portal needs head-of-department sign-off and this account only has the "
        "teacher role, so I can't release the 8B report myself.",
        risk_tools={"get_gradebook": "read_only", "compute_final_grades": "reversible",
                    "publish_report": "irreversible", "export_student_records": "regulated"},
    ),
)  # fmt: skip
