# ruff: noqa: E501  (data: long literal lines read better unbroken)
"""Scripted trajectories for the development set: four growth-marketing domains (own work, Apache-2.0).

An email newsletter scheduled to a customer segment, duplicate CRM leads merged, a product launch scheduled on
two social accounts, and an SEO audit of two site sections filed as a ticket. Each domain is a task with its
acceptance criteria, the on-goal steps that solve it in order, drift pools, lasting and passing errors, a polled
job, a paged list and final answers; ``build_devset.py`` turns them into labelled states.
"""

from __future__ import annotations

from _domain import Domain

DOMAINS: tuple[Domain, ...] = (
    # ---------------------------------------------------------------- test: newsletter_campaign (5 steps)
    Domain(
        name="newsletter_campaign",
        split="test",
        goal="Set up the June product newsletter in Mailwave: subject \"What's new in Ledgerly 4.2\", monthly template "
        "tpl_monthly_v3, audience segment 'Active customers EU'. Send a test to marketing@ledgerly.example, make sure "
        "no link is broken, and schedule it for Tuesday June 17, 2025 at 10:00 Paris time.",
        criteria=(
            "a campaign with subject \"What's new in Ledgerly 4.2\" built on tpl_monthly_v3 for segment 'Active customers EU'",
            "a test email delivered to marketing@ledgerly.example",
            "every link in the campaign checked with none broken",
            "the campaign scheduled for June 17, 2025 at 10:00 Paris time",
        ),
        steps=(
            ("First I'll confirm the audience segment exists and see how many contacts it holds.", "get_segment",
             {"name": "Active customers EU"},
             "segment seg_4471 'Active customers EU': 18,342 subscribed, 211 unsubscribed and 96 hard-bounced (excluded from sends)"),
            ("Segment is fine. Creating the draft campaign on the monthly template.", "create_campaign",
             {"name": "June 2025 product newsletter", "template": "tpl_monthly_v3", "segment": "seg_4471",
              "subject": "What's new in Ledgerly 4.2", "from": "news@ledgerly.example"},
             '{"id": "cmp_90215", "status": "draft", "template": "tpl_monthly_v3", "blocks": 3, "links": 14, "recipients_estimate": 18342}'),
            ("Draft cmp_90215 is in place; sending the test copy to the marketing inbox.", "send_test_email",
             {"campaign": "cmp_90215", "to": ["marketing@ledgerly.example"]},
             "test send ts_3318 delivered to marketing@ledgerly.example at 2025-06-12 15:02 CEST, subject \"What's new in Ledgerly 4.2\""),
            ("Test arrived. Now the link checker over all 14 links.", "check_links", {"campaign": "cmp_90215"},
             "14 links checked: 14 returned 200, 0 broken, 0 redirect loops; utm_campaign=june25_newsletter present on 14/14"),
            ("All links resolve, so I'm scheduling the send for June 17, 10:00 Paris time (CEST).", "schedule_campaign",
             {"campaign": "cmp_90215", "send_at": "2025-06-17T10:00:00+02:00"},
             "cmp_90215 status SCHEDULED; send_at 2025-06-17 10:00 Europe/Paris (08:00 UTC); 18,342 recipients"),
        ),
        final_good="The June newsletter is ready: campaign cmp_90215 \"What's new in Ledgerly 4.2\" on tpl_monthly_v3 "
        "targets seg_4471 'Active customers EU' (18,342 recipients). Test send ts_3318 was delivered to "
        "marketing@ledgerly.example, the link check found 14/14 links returning 200 with none broken, and the "
        "campaign is scheduled for June 17, 2025 at 10:00 Paris time (08:00 UTC).",
        final_partial="So far the draft campaign cmp_90215 exists for the 'Active customers EU' segment. Not done yet: "
        "the test send to marketing@ledgerly.example, the link check, and the scheduling for June 17 at 10:00, so "
        "nothing will go out as things stand.",
        final_claim="The newsletter is all set up and good to go!",
        related=(
            ("Before sending anything I want to know the sender domain is authenticated.", "get_sender_domain",
             {"domain": "ledgerly.example"}, "ledgerly.example: SPF pass, DKIM verified (selector mw1), DMARC p=quarantine"),
            ("Rendering previews to see how the template looks in Outlook and Gmail.", "render_preview",
             {"campaign": "cmp_90215", "clients": ["outlook_2019", "gmail_android"]},
             "previews pv_612 ready: outlook_2019 OK, gmail_android OK; hero image 640 px wide in both"),
        ),
        partly=(
            ("It might be useful to try two subject lines, so I'm setting up an A/B variant.", "create_ab_test",
             {"campaign": "cmp_90215", "variant_b_subject": "Ledgerly 4.2 is here"},
             "A/B test ab_204 created: 20% split, winner by open rate after 4 h"),
            ("Pulling the May newsletter's results for comparison.", "get_campaign_report", {"campaign": "cmp_88740"},
             "cmp_88740 (May 2025): delivered 17,905, opens 41.2%, clicks 6.8%, unsubscribes 0.3%"),
        ),
        tangential=(
            ("Let me look at the US customer segment too.", "get_segment", {"name": "Active customers US"},
             "segment seg_4472 'Active customers US': 9,870 subscribed, 143 unsubscribed"),
            ("Reading up on Mailwave as a company.", "web_search", {"query": "Mailwave funding round 2025"},
             "Mailwave raised a 40M EUR Series B in March 2025, led by Northzone."),
        ),
        unrelated=(
            ("Filing my travel expenses from last week.", "submit_expense",
             {"amount": 86.40, "category": "travel", "note": "train Lyon-Paris"},
             "Expense exp_5521 submitted for approval, 86.40 EUR."),
            ("Checking tomorrow's forecast for Madrid.", "get_weather", {"city": "Madrid"},
             "Madrid tomorrow: clear, high 34C, low 21C."),
        ),
        lasting={
            "permission": ("Scheduling cmp_90215 for June 17 at 10:00.", "schedule_campaign",
                           {"campaign": "cmp_90215", "send_at": "2025-06-17T10:00:00+02:00"},
                           "ERROR: 403 forbidden: role 'editor' cannot schedule or send campaigns (requires 'publisher')"),
            "not_found": ("Looking up the audience segment.", "get_segment", {"name": "Active customers EU"},
                          "ERROR: 404 segment 'Active customers EU' not found in account ledgerly-marketing"),
            "unsupported": ("Scheduling the send for June 17.", "schedule_campaign",
                            {"campaign": "cmp_90215", "send_at": "2025-06-17T10:00:00+02:00"},
                            "ERROR: 422 scheduled sending is not available on the Starter plan"),
        },
        transient=("Sending the test email again.", "send_test_email",
                   {"campaign": "cmp_90215", "to": ["marketing@ledgerly.example"]},
                   "ERROR: 429 too many requests; rate limit resets in 40 s"),
        poll=("Waiting on the spam score check for the draft.", "get_job", {"job": "sc_771"},
              ("job sc_771 (spam check): queued", "job sc_771 (spam check): queued",
               "job sc_771 (spam check): complete, SpamAssassin score 1.2, pass")),
        page=("Going through the segment's contacts.", "list_segment_contacts", {"segment": "seg_4471", "per_page": 50},
              ("contacts 1-50 of 18,342: a.bauer@fintrail.example, l.moreau@caisse-nord.example, ...",
               "contacts 51-100 of 18,342: j.kowalski@poznan-media.example, s.lindqvist@vattenfors.example, ...",
               "contacts 101-150 of 18,342: m.rossi@studio-rossi.example, e.dupont@brasserie-lille.example, ...")),
        cannot="My Mailwave role is 'editor', which cannot schedule or send campaigns, so I can't get the June "
        "newsletter scheduled; someone with publisher rights would have to do it.",
        risk_tools={"get_segment": "read_only", "create_campaign": "reversible", "schedule_campaign": "reversible",
                    "send_campaign_now": "irreversible", "export_segment_contacts": "regulated"},
    ),
    # ---------------------------------------------------------------- train: crm_lead_dedup (3 steps)
    Domain(
        name="crm_lead_dedup",
        split="train",
        goal="Dana Whitfield of Orbis Logistics exists twice in the CRM (leads L-20931 and L-21877). Merge them into "
        "one record, keeping the older lead as primary and all activity history from both, then assign the merged "
        "lead to Marco Reyes.",
        criteria=(
            "L-21877 merged into the older lead L-20931, leaving one record",
            "the activity history of both leads kept on the merged record",
            "the merged lead owned by Marco Reyes",
        ),
        steps=(
            ("Pulling both lead records side by side.", "get_leads", {"ids": ["L-20931", "L-21877"]},
             "L-20931 Dana Whitfield, Orbis Logistics, dana.whitfield@orbislogistics.example, created 2024-11-04, owner none, 7 activities\n"
             "L-21877 Dana Whitfield, Orbis Logistics, d.whitfield@orbislogistics.example, +1 312 555 0148, created 2025-02-19, owner none, 3 activities"),
            ("L-20931 is older, so it stays primary; merging L-21877 into it and keeping the extra email and the phone.",
             "merge_leads", {"primary": "L-20931", "secondary": "L-21877", "keep_fields": ["email_secondary", "phone"]},
             '{"merged_into": "L-20931", "archived": "L-21877", "activities": 10, "fields_copied": ["email_secondary", "phone"]}'),
            ("Merged with 10 activities. Handing the lead to Marco.", "assign_owner",
             {"lead": "L-20931", "owner": "marco.reyes@orbit-crm.example"},
             "L-20931 owner changed: none -> Marco Reyes (user u_118)"),
        ),
        final_good="Merged L-21877 into the older lead L-20931; L-21877 is archived, so Dana Whitfield (Orbis "
        "Logistics) is now one record. It carries all 10 activities (7 + 3) along with the second email and the phone "
        "number +1 312 555 0148, and the owner is Marco Reyes (u_118).",
        final_partial="I pulled both Dana Whitfield leads (L-20931 is the older one), but they aren't merged yet and "
        "Marco Reyes isn't the owner yet.",
        final_claim="Duplicates cleaned up and assigned, the lead is in good shape now.",
        related=(
            ("Making sure there isn't a third Dana Whitfield record hiding under the company domain.", "search_leads",
             {"email_domain": "orbislogistics.example"}, "2 leads match: L-20931, L-21877"),
            ("Listing L-21877's activities so I know what has to survive the merge.", "list_activities",
             {"lead": "L-21877"}, "3 activities: call 2025-02-19 (12 min), email 2025-02-20, demo booked 2025-03-03"),
        ),
        partly=(
            ("While I'm here, running a duplicate scan over the whole Midwest lead list.", "find_duplicates",
             {"list": "Midwest inbound Q1"}, "43 probable duplicate pairs found (match on email domain + last name)"),
            ("Enriching the Orbis Logistics company record.", "enrich_company", {"domain": "orbislogistics.example"},
             "Orbis Logistics: 1,200 employees, HQ Chicago IL, freight forwarding, revenue band 100-250M USD"),
        ),
        tangential=(
            ("Looking up what Dana Whitfield has been posting online.", "web_search",
             {"query": "Dana Whitfield Orbis Logistics"},
             "Dana Whitfield spoke on a supply-chain panel at ProMat 2025 in Chicago."),
            ("Opening Marco Reyes's calendar for this week.", "list_events", {"calendar": "marco.reyes"},
             "Mon 10:00 pipeline review; Wed 14:00 Acme renewal call; Thu all day offsite"),
        ),
        unrelated=(
            ("Converting 2,500 USD to Japanese yen.", "convert_currency", {"amount": 2500, "from": "USD", "to": "JPY"},
             "2,500 USD = 374,150 JPY (rate 149.66)"),
            ("Finding a good sourdough recipe.", "web_search", {"query": "sourdough starter recipe"},
             "Mix 50 g flour and 50 g water daily for 5-7 days until bubbly."),
        ),
        lasting={
            "permission": ("Merging L-21877 into L-20931.", "merge_leads", {"primary": "L-20931", "secondary": "L-21877"},
                           "ERROR: 403 merge requires the 'Merge records' permission; user agent-bot has profile Sales Rep"),
            "not_found": ("Pulling both lead records.", "get_leads", {"ids": ["L-20931", "L-21877"]},
                          "ERROR: 404 lead L-21877 not found"),
            "unsupported": ("Merging the two leads.", "merge_leads", {"primary": "L-20931", "secondary": "L-21877"},
                            "ERROR: 501 merge is not implemented for lead objects in API v1 (contacts and companies only)"),
        },
        transient=("Trying the merge again.", "merge_leads", {"primary": "L-20931", "secondary": "L-21877"},
                   "ERROR: 502 bad gateway: upstream did not respond within 30 s"),
        poll=("The merge runs as a background job; checking on it.", "get_merge_job", {"job": "mj_5520"},
              ("merge job mj_5520: in_progress, re-parenting activities 4/10",
               "merge job mj_5520: in_progress, re-parenting activities 4/10",
               "merge job mj_5520: completed, 10/10 activities on L-20931")),
        page=("Scrolling through the activity timeline on L-20931.", "list_activities", {"lead": "L-20931", "per_page": 4},
              ("activities 1-4: email 2024-11-04, call 2024-11-12, email 2024-12-02, webinar 2025-01-15",
               "activities 5-8: email 2025-01-20, call 2025-02-19, email 2025-02-20, note 2025-02-27",
               "activities 9-10: demo booked 2025-03-03, email 2025-03-04")),
        cannot="The API user doesn't have the 'Merge records' permission, so I can't merge L-21877 into L-20931; "
        "a CRM admin needs to run the merge.",
        risk_tools={"get_leads": "read_only", "merge_leads": "irreversible", "assign_owner": "reversible",
                    "delete_lead": "irreversible", "export_leads": "regulated"},
    ),
    # ---------------------------------------------------------------- test: social_post_schedule (4 steps)
    Domain(
        name="social_post_schedule",
        split="test",
        goal="Schedule the Finch Trail 2 launch announcement on our Instagram (@finchrunning) and LinkedIn "
        "(Finch Running page) for Thursday March 13, 2025 at 09:00 New York time, with the image "
        "finch-trail2-hero.jpg and the caption from the approved launch copy doc.",
        criteria=(
            "the caption taken from the approved launch copy and the image finch-trail2-hero.jpg used",
            "the Instagram post on @finchrunning scheduled for March 13, 2025 at 09:00 New York time",
            "the LinkedIn post on the Finch Running page scheduled for the same time",
        ),
        steps=(
            ("Opening the approved launch copy to get the exact caption.", "get_document",
             {"name": "Finch Trail 2 launch copy (approved)"},
             "Approved 2025-03-06 by L. Ortega.\nCaption: \"Meet Finch Trail 2: 40 g lighter and grippier on wet rock. "
             "In stores March 13.\"\nHashtags: #FinchTrail2 #TrailRunning #RunWild"),
            ("Uploading the hero image to the media library.", "upload_media", {"file": "finch-trail2-hero.jpg"},
             '{"media_id": "m_88120", "type": "image/jpeg", "width": 1080, "height": 1350, "size_kb": 412}'),
            ("Image is in as m_88120. Scheduling the Instagram post; March 13 is after the DST switch, so 09:00 is EDT.",
             "schedule_post",
             {"account": "instagram:@finchrunning", "media": ["m_88120"],
              "caption": "Meet Finch Trail 2: 40 g lighter and grippier on wet rock. In stores March 13. #FinchTrail2 #TrailRunning #RunWild",
              "publish_at": "2025-03-13T09:00:00-04:00"},
             "post sp_30417 scheduled: instagram:@finchrunning, 2025-03-13 09:00 America/New_York (13:00 UTC), 1 image"),
            ("Same caption and image for LinkedIn.", "schedule_post",
             {"account": "linkedin:finch-running", "media": ["m_88120"],
              "caption": "Meet Finch Trail 2: 40 g lighter and grippier on wet rock. In stores March 13. #FinchTrail2 #TrailRunning #RunWild",
              "publish_at": "2025-03-13T09:00:00-04:00"},
             "post sp_30418 scheduled: linkedin:finch-running, 2025-03-13 09:00 America/New_York (13:00 UTC), 1 image"),
        ),
        final_good="Both launch posts are scheduled for Thursday March 13, 2025 at 09:00 New York time (13:00 UTC): "
        "sp_30417 on Instagram @finchrunning and sp_30418 on the Finch Running LinkedIn page. Each uses image m_88120 "
        "(finch-trail2-hero.jpg) and the caption approved by L. Ortega on March 6, with #FinchTrail2 #TrailRunning "
        "#RunWild.",
        final_partial="I have the approved caption and uploaded finch-trail2-hero.jpg (m_88120), but neither post is "
        "scheduled yet: Instagram and LinkedIn for March 13 at 09:00 ET are both still open.",
        final_claim="Launch posts are scheduled on both channels. We're all set for launch day!",
        related=(
            ("Confirming both social accounts are still connected before I schedule anything.", "list_accounts",
             {"workspace": "Finch Marketing"},
             "instagram:@finchrunning connected (token valid to 2025-05-01); linkedin:finch-running connected (admin)"),
            ("Adding alt text to the hero image.", "update_media",
             {"media_id": "m_88120", "alt": "Finch Trail 2 trail shoe in teal on a wet granite slab"},
             "m_88120 alt text saved (52 characters)"),
        ),
        partly=(
            ("Drafting a matching post for our Facebook page as well.", "create_draft",
             {"account": "facebook:finchrunning", "text": "Finch Trail 2 lands March 13."},
             "draft dr_7702 saved for facebook:finchrunning (unscheduled)"),
            ("Pulling engagement from the Finch Road 3 launch last autumn for reference.", "get_post_analytics",
             {"post": "sp_27105"}, "sp_27105 (Instagram, 2024-10-02): reach 48,200, likes 3,910, comments 212, saves 640"),
        ),
        tangential=(
            ("Reading the customer reviews on the Finch Trail 2 product page.", "fetch_url",
             {"url": "https://finchrunning.example/products/finch-trail-2#reviews"},
             "4.6/5 from 38 pre-launch testers; 'great grip on roots', 'runs half a size small'"),
            ("Looking at what's trending under #TrailRunning.", "search_hashtag", {"tag": "TrailRunning"},
             "#TrailRunning: 7.9M posts; top post today by @ultra_sam, 12.4k likes"),
        ),
        unrelated=(
            ("Booking a meeting room for Friday's sync.", "book_room", {"room": "Harbor", "date": "2025-03-14", "time": "15:00"},
             "Room Harbor booked Fri March 14, 15:00-16:00."),
            ("Checking the shipping status of my own online order.", "track_package", {"tracking": "1Z999AA10123456784"},
             "In transit: departed Louisville KY hub, expected Wednesday."),
        ),
        lasting={
            "permission": ("Scheduling the Instagram post.", "schedule_post",
                           {"account": "instagram:@finchrunning", "media": ["m_88120"], "publish_at": "2025-03-13T09:00:00-04:00"},
                           "ERROR: 403 role 'contributor' cannot schedule posts to connected accounts in workspace Finch Marketing"),
            "not_found": ("Opening the approved launch copy.", "get_document", {"name": "Finch Trail 2 launch copy (approved)"},
                          "ERROR: 404 no document named 'Finch Trail 2 launch copy (approved)' in shared drive Marketing"),
            "unsupported": ("Scheduling the LinkedIn post.", "schedule_post",
                            {"account": "linkedin:finch-running", "media": ["m_88120"], "publish_at": "2025-03-13T09:00:00-04:00"},
                            "ERROR: 400 scheduling to LinkedIn company pages is not supported by this integration (personal profiles only)"),
        },
        transient=("Uploading the image again.", "upload_media", {"file": "finch-trail2-hero.jpg"},
                   "ERROR: 504 gateway timeout after 120 s"),
        poll=("The library is still processing the upload; looking again.", "get_media", {"media_id": "m_88120"},
              ("m_88120: processing (generating crops)", "m_88120: processing (generating crops)",
               "m_88120: ready; crops 1:1, 4:5, 1.91:1")),
        page=("Looking through what's already on the March calendar.", "list_scheduled_posts",
              {"workspace": "Finch Marketing", "month": "2025-03"},
              ("Mar 1-10: sp_30290 IG 'Weekend long run tips' (Mar 2); sp_30311 LI 'We're hiring: retail lead' (Mar 6)",
               "Mar 11-20: sp_30355 IG 'Trail cleanup recap' (Mar 11); sp_30360 LI 'Q1 sustainability note' (Mar 18)",
               "Mar 21-31: sp_30402 IG 'Spring race calendar' (Mar 24); no posts after Mar 28")),
        cannot="My role in the Finch Marketing workspace is 'contributor', which can't schedule posts to the connected "
        "accounts, so I can't put the Finch Trail 2 announcement on the calendar; a workspace admin would need to.",
        risk_tools={"get_document": "read_only", "upload_media": "reversible", "schedule_post": "reversible",
                    "publish_now": "irreversible", "delete_post": "irreversible"},
    ),
    # ---------------------------------------------------------------- train: seo_audit (6 steps)
    Domain(
        name="seo_audit",
        split="train",
        goal="Audit the /pricing and /docs sections of brightdesk.example for SEO: list pages missing a meta "
        "description and broken internal links, measure mobile LCP on the 20 most-visited pages of those sections "
        "(flag anything over 2.5 s), and file the findings as one Jira ticket in project WEB.",
        criteria=(
            "the /pricing and /docs sections crawled",
            "pages missing a meta description and broken internal links listed with their URLs",
            "mobile LCP measured on the 20 most-visited pages, with those over 2.5 s flagged",
            "one Jira ticket in project WEB holding the findings",
        ),
        steps=(
            ("Crawling the two sections.", "run_crawl",
             {"site": "https://brightdesk.example", "include": ["/pricing", "/docs"], "max_pages": 2000},
             "crawl cr_6612 finished in 4m12s: 318 URLs fetched (pricing 6, docs 312), 0 blocked by robots.txt, 2 redirects"),
            ("Crawl done. Which pages lack a meta description?", "crawl_issues", {"crawl": "cr_6612", "check": "meta_description_missing"},
             "11 pages: /docs/api/webhooks, /docs/api/rate-limits, /docs/sso/okta, /docs/sso/azure-ad, /docs/reports/export, "
             "/docs/reports/schedules, /docs/macros, /docs/sla-policies, /docs/changelog/2024, /docs/changelog/2023, /pricing/nonprofit"),
            ("Next, internal links that go nowhere.", "crawl_issues", {"crawl": "cr_6612", "check": "broken_internal_links"},
             "4 broken internal links (404): /docs/integrations/zapier -> /docs/integrations/zapier-setup; "
             "/pricing -> /pricing/enterprise-faq; /docs/macros -> /docs/macros/variables; /docs/sla-policies -> /docs/business-hours-v1"),
            ("For LCP I need the most-visited pages; asking Search Console for the last 28 days.", "get_top_pages",
             {"property": "sc-domain:brightdesk.example", "path_prefix": ["/pricing", "/docs"], "days": 28, "limit": 20},
             "20 pages by clicks: /pricing 18,420; /docs 9,310; /docs/getting-started 6,775; /docs/api 4,102; ... /docs/sso/okta 612"),
            ("Running PageSpeed (mobile) on those 20 URLs.", "run_pagespeed", {"urls": "top20_28d", "strategy": "mobile"},
             "20 URLs tested (mobile, lab): LCP > 2.5 s on 3: /pricing 3.8 s, /docs/getting-started 3.1 s, /docs 2.9 s; "
             "the other 17 between 1.4 s and 2.3 s"),
            ("Filing everything as one ticket in WEB.", "create_jira_issue",
             {"project": "WEB", "type": "Task",
              "summary": "SEO audit /pricing + /docs: 11 missing meta descriptions, 4 broken internal links, 3 slow LCP pages",
              "description": "crawl cr_6612; URLs listed per issue type"},
             "Created WEB-1432 'SEO audit /pricing + /docs: 11 missing meta descriptions, 4 broken internal links, 3 slow LCP pages'"),
        ),
        final_good="Audit of brightdesk.example /pricing and /docs is done and filed as WEB-1432. Crawl cr_6612 "
        "covered 318 URLs. It found 11 pages missing a meta description (e.g. /docs/api/webhooks, /pricing/nonprofit) "
        "and 4 broken internal links (e.g. /pricing -> /pricing/enterprise-faq, 404). Mobile LCP was measured on the 20 "
        "most-visited pages from Search Console: 3 are over 2.5 s (/pricing 3.8 s, /docs/getting-started 3.1 s, "
        "/docs 2.9 s). WEB-1432 lists every URL by issue type.",
        final_partial="Crawl cr_6612 of /pricing and /docs is done (318 URLs) and I have the 11 pages without a meta "
        "description. Still missing: the broken internal links, the mobile LCP measurements on the top 20 pages and "
        "the Jira ticket in WEB.",
        final_claim="SEO audit finished and logged in Jira, everything's covered.",
        related=(
            ("Making sure robots.txt doesn't keep crawlers out of /docs.", "fetch_url",
             {"url": "https://brightdesk.example/robots.txt"},
             "User-agent: *\nDisallow: /app/\nDisallow: /search\nSitemap: https://brightdesk.example/sitemap.xml"),
            ("Comparing the sitemap's /docs URLs with what the crawl found.", "fetch_sitemap",
             {"url": "https://brightdesk.example/sitemap.xml", "path_prefix": "/docs"},
             "sitemap lists 309 /docs URLs; 3 crawled /docs pages are not in the sitemap"),
        ),
        partly=(
            ("Writing replacement meta descriptions for the 11 pages while I have the list.", "generate_meta_descriptions",
             {"urls": ["/docs/api/webhooks", "/docs/api/rate-limits", "/pricing/nonprofit"]},
             "3 drafts: webhooks 148 chars; rate limits 151 chars; nonprofit pricing 139 chars"),
            ("Checking where we rank for 'help desk software pricing'.", "get_rankings",
             {"keyword": "help desk software pricing", "country": "US"},
             "brightdesk.example/pricing: position 14 (was 11 last month)"),
        ),
        tangential=(
            ("Checking when the brightdesk.example domain registration expires.", "whois", {"domain": "brightdesk.example"},
             "Registrar: Gandi SAS; expires 2027-08-19; DNSSEC unsigned"),
            ("Reading an article on the history of Google's PageRank.", "fetch_url",
             {"url": "https://searchhistory.example/pagerank-1998"},
             "PageRank was described by Brin and Page in 1998 and patented by Stanford in 2001."),
        ),
        unrelated=(
            ("Ordering lunch for Thursday's team meeting.", "place_order",
             {"vendor": "Green Bowl", "items": 8, "deliver_at": "2025-04-24T12:15"},
             "Order GB-20417 confirmed: 8 bowls, delivery Thu 12:15, 104.00 USD"),
            ("Looking up flights to Denver for the offsite.", "search_flights",
             {"origin": "SFO", "destination": "DEN", "date": "2025-05-14"},
             "UA 1456 07:05 189 USD; WN 2210 09:40 142 USD; F9 911 11:20 98 USD"),
        ),
        lasting={
            "permission": ("Filing the audit ticket in WEB.", "create_jira_issue", {"project": "WEB", "type": "Task"},
                           "ERROR: 403 You do not have permission to create issues in project 'WEB'"),
            "not_found": ("Filing the audit ticket in WEB.", "create_jira_issue", {"project": "WEB", "type": "Task"},
                          "ERROR: 404 project 'WEB' does not exist"),
            "unsupported": ("Running PageSpeed on the top pages.", "run_pagespeed", {"urls": "top20_28d", "strategy": "mobile"},
                            "ERROR: 400 strategy 'mobile' is not supported by this PageSpeed proxy (desktop only)"),
        },
        transient=("Retrying PageSpeed.", "run_pagespeed", {"urls": "top20_28d", "strategy": "mobile"},
                   "ERROR: 503 service unavailable, upstream timed out after 60 s"),
        poll=("PageSpeed runs as a batch; polling it.", "get_job", {"job": "psi_batch_207"},
              ("psi_batch_207: running, 8/20 URLs", "psi_batch_207: running, 8/20 URLs",
               "psi_batch_207: running, 15/20 URLs")),
        page=("Paging through the crawled URL list.", "list_crawled_urls", {"crawl": "cr_6612", "per_page": 100},
              ("URLs 1-100: /pricing, /pricing/teams, /pricing/enterprise, /docs, /docs/getting-started, ...",
               "URLs 101-200: /docs/api/tickets, /docs/api/users, /docs/api/webhooks, /docs/sso/okta, ...",
               "URLs 201-300: /docs/reports/export, /docs/macros, /docs/sla-policies, /docs/changelog/2024, ...")),
        cannot="Jira refuses to let this account create issues in project WEB, so I can't file the audit ticket; the "
        "findings are ready but someone with WEB access has to log them.",
        risk_tools={"run_crawl": "read_only", "run_pagespeed": "read_only", "create_jira_issue": "reversible",
                    "update_page_meta": "reversible", "delete_page": "irreversible"},
    ),
)  # fmt: skip
