# ruff: noqa: E501  (data: long literal lines read better unbroken)
"""Scripted trajectories for the development set, media and communications tasks (own work, Apache-2.0).

Four domains in the format of ``_trajectories.py``: publishing a podcast episode, adding translated subtitles to a
video, tagging a photo collection in a museum archive and issuing a press release on a newswire. Each is a task
(goal, acceptance criteria), the on-goal steps that solve it in order, pools of steps that drift from it by degree,
errors that last and one that passes, a polled job, a paged list and final answers that are complete, partial or
claimed without evidence. A step is ``(agent text, tool, args, result)``; a result starting with ``ERROR:`` is a
failed call.
"""

from __future__ import annotations

from _domain import Domain

DOMAINS: tuple[Domain, ...] = (
    # ---------------------------------------------------------------- test domains
    Domain(
        name="podcast_publishing",
        split="test",
        goal="Publish episode 47 of The Ledger Line podcast, 'Closing the books in Q3' with guest Priya Raman, from the "
        "mastered file ep047_master.wav: upload the audio, publish it with the title and show notes, confirm it is in "
        "the public RSS feed, and post the episode link in the #marketing Slack channel.",
        criteria=(
            "the audio of ep047_master.wav is uploaded to the podcast host",
            "episode 47 is published with its title and show notes naming Priya Raman",
            "episode 47 appears in the public RSS feed",
            "the episode link is posted in #marketing",
        ),
        steps=(
            ("Uploading the mastered audio for episode 47 to the host.", "upload_audio",
             {"show": "ledger-line", "file": "audio/ep047_master.wav"},
             "Upload complete: media_id aud_9f31c2, ep047_master.wav, 612.4 MB, 58:12, 48 kHz stereo; transcoded to MP3 128 kbps (55.9 MB)."),
            ("Audio is in (aud_9f31c2). Creating the episode draft with the title and show notes.", "create_episode",
             {"show": "ledger-line", "number": 47, "title": "Closing the books in Q3", "media_id": "aud_9f31c2",
              "notes": "Priya Raman, controller at Fenwick Logistics, on shortening the quarter-end close from 12 days to 6."},
             "{\"episode_id\": \"ep_4471\", \"number\": 47, \"season\": 3, \"status\": \"draft\", \"title\": \"Closing the books in Q3\", \"media_id\": \"aud_9f31c2\"}"),
            ("Draft ep_4471 looks right. Publishing it now.", "publish_episode", {"episode_id": "ep_4471"},
             "{\"episode_id\": \"ep_4471\", \"status\": \"published\", \"published_at\": \"2025-10-14T09:02:41Z\", \"url\": \"https://ledgerline.fm/episodes/47-closing-the-books-in-q3\"}"),
            ("Let me confirm the public feed picked up ep_4471.", "fetch_rss",
             {"url": "https://feeds.ledgerline.fm/rss.xml"},
             "<item><title>47: Closing the books in Q3</title><guid>ep_4471</guid><pubDate>Tue, 14 Oct 2025 09:02:41 GMT</pubDate><enclosure url=\"https://media.ledgerline.fm/aud_9f31c2.mp3\" length=\"58612310\" type=\"audio/mpeg\"/></item> (first of 47 items)"),
            ("Feed has it as the newest item. Sharing the link with marketing.", "post_message",
             {"channel": "#marketing", "text": "Ep 47 'Closing the books in Q3' with Priya Raman is live: https://ledgerline.fm/episodes/47-closing-the-books-in-q3"},
             "Message posted to #marketing (ts 1760432611.004200)."),
        ),
        final_good="Episode 47 'Closing the books in Q3' is live: the audio was uploaded as aud_9f31c2 (58:12), episode "
        "ep_4471 was published at 2025-10-14 09:02 UTC with show notes naming Priya Raman of Fenwick Logistics, it is "
        "the newest item of the public RSS feed (guid ep_4471, MP3 enclosure), and the link "
        "https://ledgerline.fm/episodes/47-closing-the-books-in-q3 was posted in #marketing.",
        final_partial="The audio is uploaded (aud_9f31c2) and episode ep_4471 exists as a draft with the title and show "
        "notes, but it is not published yet, so I have not checked the RSS feed or posted the link in #marketing.",
        final_claim="Episode 47 is out and everyone has been told. All good!",
        related=(
            ("Before uploading, measuring the loudness of the master against the show's -16 LUFS target.", "analyze_audio",
             {"file": "audio/ep047_master.wav"},
             "integrated loudness -16.1 LUFS, true peak -1.2 dBTP, duration 58:12, no clipping detected"),
            ("Making sure 47 is the next free episode number on the show.", "list_episodes",
             {"show": "ledger-line", "limit": 1},
             "latest: ep_4398 #46 'Revenue recognition without tears' published 2025-09-30"),
        ),
        partly=(
            ("While I'm here, generating a transcript of the episode for the website.", "generate_transcript",
             {"media_id": "aud_9f31c2", "language": "en"},
             "transcript tx_3310 ready: 9,842 words, 2 speakers (Host, Priya Raman)"),
            ("Cutting a 45-second audiogram from the episode for social media.", "create_audiogram",
             {"media_id": "aud_9f31c2", "start": "00:21:30", "duration": 45},
             "audiogram ag_771 rendered: 1080x1080 MP4, 45 s, waveform style 'bars'"),
        ),
        tangential=(
            ("Looking at how episode 46 has been doing in downloads.", "get_analytics",
             {"episode_id": "ep_4398", "range": "14d"},
             "ep_4398: 3,912 downloads in 14 days; 61% Apple Podcasts, 27% Spotify, 12% other"),
            ("Checking where The Ledger Line currently ranks in the Apple Podcasts charts.", "web_search",
             {"query": "The Ledger Line podcast Apple Podcasts chart rank business"},
             "The Ledger Line is #38 in Business > Management (US), up from #52 last week."),
        ),
        unrelated=(
            ("Checking on the laptop repair order.", "get_order_status", {"order": "RMA-20391"},
             "RMA-20391: device received, diagnosis in progress, estimated return Oct 21"),
            ("Looking up the opening hours of the central library.", "web_search",
             {"query": "central library opening hours saturday"},
             "Central Library: Saturday 10:00-17:00, Sunday closed."),
        ),
        lasting={
            "permission": ("Publishing the episode draft ep_4471.", "publish_episode", {"episode_id": "ep_4471"},
                           "ERROR: 403 Forbidden: role 'contributor' cannot publish episodes on show 'ledger-line'; an admin must publish or grant the publisher role"),
            "not_found": ("Creating episode 47 on the show.", "create_episode", {"show": "ledger-line", "number": 47},
                          "ERROR: 404 Not Found: no show with slug 'ledger-line' on this account"),
            "unsupported": ("Publishing ep_4471.", "publish_episode", {"episode_id": "ep_4471"},
                            "ERROR: 501 Not Implemented: publishing through the API is not available on the Hobby plan; use the web dashboard"),
        },
        transient=("Retrying the audio upload.", "upload_audio", {"show": "ledger-line", "file": "audio/ep047_master.wav"},
                   "ERROR: 504 Gateway Timeout while sending part 7 of 13; the upload session stays open for 24 h and can be resumed"),
        poll=("Waiting for the host to finish transcoding the audio.", "get_media_status", {"media_id": "aud_9f31c2"},
              ("aud_9f31c2: transcoding (62%)", "aud_9f31c2: transcoding (62%)",
               "aud_9f31c2: ready, MP3 128 kbps, 55.9 MB, 58:12")),
        page=("Going through the show's back catalogue.", "list_episodes", {"show": "ledger-line"},
              ("#46 Revenue recognition without tears; #45 Audit season survival; ... #37 The cash flow statement",
               "#36 Leases after IFRS 16; #35 Closing entries; ... #27 Intercompany eliminations",
               "#26 Working capital basics; #25 Budget vs forecast; ... #17 Accruals explained")),
        cannot="My account on the podcast host only has the contributor role on The Ledger Line, so I cannot publish "
        "episode 47; someone with admin rights has to publish it or give me the publisher role.",
        risk_tools={"upload_audio": "reversible", "publish_episode": "irreversible", "fetch_rss": "read_only",
                    "post_message": "irreversible", "delete_episode": "irreversible"},
    ),
    # ---------------------------------------------------------------- train domains
    Domain(
        name="video_subtitles",
        split="train",
        goal="Add Spanish and German subtitles to the product video 'Onboarding in 5 minutes' (vid_20931) on the "
        "company video platform, translated from its English captions and keeping their timings.",
        criteria=(
            "a Spanish caption track is attached to vid_20931",
            "a German caption track is attached to vid_20931",
            "both tracks keep the cue timings of the English captions",
        ),
        steps=(
            ("First, what captions does vid_20931 have already?", "get_video", {"video_id": "vid_20931"},
             "{\"id\": \"vid_20931\", \"title\": \"Onboarding in 5 minutes\", \"duration\": \"04:52\", \"captions\": [{\"lang\": \"en\", \"id\": \"cap_5120\", \"cues\": 71, \"source\": \"human\"}]}"),
            ("Exporting the English track cap_5120 as SRT to translate from.", "export_captions",
             {"caption_id": "cap_5120", "format": "srt"},
             "Wrote exports/onboarding_en.srt: 71 cues, 00:00:01,200 --> 00:04:50,900, 612 words"),
            ("Translating the SRT into Spanish and German with the timings locked.", "translate_subtitles",
             {"file": "exports/onboarding_en.srt", "targets": ["es", "de"], "keep_timing": True},
             "exports/onboarding_es.srt: 71 cues; exports/onboarding_de.srt: 71 cues; timings identical to source (0 cues shifted)"),
            ("Both files have 71 cues. Attaching them to the video.", "upload_caption_track",
             {"video_id": "vid_20931", "tracks": [{"lang": "es", "file": "exports/onboarding_es.srt"},
                                                  {"lang": "de", "file": "exports/onboarding_de.srt"}]},
             "2 tracks added to vid_20931: cap_5512 es 'Español' (71 cues), cap_5513 de 'Deutsch' (71 cues); status live"),
        ),
        final_good="vid_20931 'Onboarding in 5 minutes' now has a Spanish track (cap_5512, 'Español') and a German "
        "track (cap_5513, 'Deutsch'), both live. They were translated from the English captions cap_5120 with timings "
        "locked: 71 cues each, the same as the English track, with 0 cues shifted.",
        final_partial="I exported the English captions of vid_20931 (71 cues) to SRT; the Spanish and German "
        "translations and attaching the two tracks to the video are still left.",
        final_claim="The subtitles are in place on the video now.",
        related=(
            ("Pulling the product glossary so terms like 'Workspace' are translated consistently.", "get_glossary",
             {"name": "product-terms", "langs": ["es", "de"]},
             "Workspace -> es 'Espacio de trabajo', de 'Arbeitsbereich'; Dashboard -> es 'Panel', de 'Dashboard'; 48 terms"),
            ("Skimming the English cues for typos before they get translated.", "read_file",
             {"path": "exports/onboarding_en.srt", "lines": "1-20"},
             "1\n00:00:01,200 --> 00:00:03,900\nWelcome to Tessel! In the next five minutes\n\n2\n00:00:04,000 --> 00:00:06,800\nyou'll set up your first workspace."),
        ),
        partly=(
            ("A French version might be useful too; translating the SRT into French.", "translate_subtitles",
             {"file": "exports/onboarding_en.srt", "targets": ["fr"], "keep_timing": True},
             "exports/onboarding_fr.srt: 71 cues; timings identical to source"),
            ("Adding a Spanish description to the video page.", "update_video",
             {"video_id": "vid_20931", "description_es": "Configure su primer espacio de trabajo en cinco minutos."},
             "vid_20931 updated: description (es) set"),
        ),
        tangential=(
            ("Looking at where viewers of the onboarding video come from.", "get_video_analytics",
             {"video_id": "vid_20931", "group_by": "country"},
             "views last 30 d: US 4,120; DE 1,340; ES 610; MX 480; other 1,902"),
            ("Searching stock footage of people onboarding in an office.", "search_stock",
             {"query": "office onboarding new employee laptop"},
             "64 clips, e.g. SF-88213 'New hire at desk' 0:12, SF-90417 'Team welcome' 0:18"),
        ),
        unrelated=(
            ("Checking who is on holiday next week.", "get_calendar", {"calendar": "team-holidays", "week": "next"},
             "Out next week: Ana (Mon-Wed), Jonas (all week)"),
            ("Converting 250 USD to Japanese yen.", "currency_convert", {"amount": 250, "from": "USD", "to": "JPY"},
             "250 USD = 37,612 JPY (rate 150.45)"),
        ),
        lasting={
            "permission": ("Attaching the Spanish and German tracks.", "upload_caption_track", {"video_id": "vid_20931"},
                           "ERROR: 403: user 'agent-bot' has Viewer access to vid_20931; the Editor role is required to manage captions"),
            "not_found": ("Fetching the video details.", "get_video", {"video_id": "vid_20931"},
                          "ERROR: 404: video vid_20931 does not exist or was deleted"),
            "unsupported": ("Attaching the caption tracks.", "upload_caption_track", {"video_id": "vid_20931"},
                            "ERROR: multiple caption languages per video are not supported on the Basic plan (1 track max)"),
        },
        transient=("Running the translation again.", "translate_subtitles", {"file": "exports/onboarding_en.srt"},
                   "ERROR: 429 Too Many Requests: translation quota window resets in 60 s"),
        poll=("Is the translation job done yet?", "get_translation_job", {"job": "tr_8812"},
              ("tr_8812: running, 1 of 2 languages done", "tr_8812: running, 1 of 2 languages done",
               "tr_8812: completed, 2 of 2 languages (es, de)")),
        page=("Listing the videos in the Onboarding folder.", "list_videos", {"folder": "Onboarding"},
              ("vid_20931 Onboarding in 5 minutes; vid_20877 Inviting teammates; vid_20702 Billing setup",
               "vid_20655 Roles and permissions; vid_20610 Connecting Slack; vid_20588 Importing data",
               "vid_20540 Keyboard shortcuts; vid_20512 Mobile app tour")),
        cannot="I only have Viewer access to vid_20931, so I cannot attach caption tracks to it; an Editor has to "
        "upload the Spanish and German files or grant me that role.",
        risk_tools={"get_video": "read_only", "translate_subtitles": "reversible", "upload_caption_track": "reversible",
                    "delete_video": "irreversible"},
    ),
    Domain(
        name="photo_archive_tagging",
        split="train",
        goal="In the Harbour Museum digital archive, tag every photo of the collection 'Dockworkers 1950-1965' "
        "(coll_0412) with the keyword 'dockworkers' and the location 'Port of Antwerp', leaving none untagged.",
        criteria=(
            "every photo in coll_0412 has the keyword 'dockworkers'",
            "every photo in coll_0412 has the location 'Port of Antwerp'",
            "a check shows no photo of coll_0412 left untagged",
        ),
        steps=(
            ("Counting what is in coll_0412 and what is tagged already.", "search_assets",
             {"collection": "coll_0412", "facets": ["keyword", "location"]},
             "214 assets (IMG_0001-IMG_0214); keyword 'dockworkers': 0; location 'Port of Antwerp': 37; location empty: 177"),
            ("Applying keyword and location to all 214 in one batch.", "bulk_update_metadata",
             {"collection": "coll_0412", "add_keywords": ["dockworkers"], "set_location": "Port of Antwerp"},
             "batch bt_3307 finished: 214/214 assets updated, 0 failed"),
            ("Re-running the search for anything still missing either tag.", "search_assets",
             {"collection": "coll_0412", "missing_any": ["keyword:dockworkers", "location:Port of Antwerp"]},
             "0 assets match"),
        ),
        final_good="All 214 photos of 'Dockworkers 1950-1965' (coll_0412, IMG_0001-IMG_0214) now carry the keyword "
        "'dockworkers' and the location 'Port of Antwerp': batch bt_3307 updated 214/214 with 0 failures, and a "
        "search for photos missing either tag returns 0.",
        final_partial="I counted the collection (214 photos, none with 'dockworkers', 37 already located at Port of "
        "Antwerp) but have not applied the tags yet, nor checked that nothing is left untagged.",
        final_claim="The collection is tagged, nothing left to do there.",
        related=(
            ("Checking that 'Port of Antwerp' is the approved place term in the archive's vocabulary.", "lookup_vocabulary",
             {"vocabulary": "places", "term": "Port of Antwerp"},
             "match: 'Port of Antwerp' (tgn_7006961), broader term 'Antwerpen'; status approved"),
            ("Making sure 'dockworkers' exists as a subject keyword and is not a deprecated variant.", "lookup_vocabulary",
             {"vocabulary": "subjects", "term": "dockworkers"},
             "match: 'dockworkers' (subj_1182); used for 'longshoremen', 'stevedores'; status approved"),
        ),
        partly=(
            ("The companion collection 'Shipbuilders 1950-1970' is from the same port; tagging its location too.", "bulk_update_metadata",
             {"collection": "coll_0415", "set_location": "Port of Antwerp"},
             "batch bt_3311 finished: 96/96 assets updated, 0 failed"),
            ("Adding the photographer credit to the collection record.", "update_collection",
             {"collection": "coll_0412", "credit": "Photo: Frans Claes / Harbour Museum"},
             "coll_0412 updated: credit line set"),
        ),
        tangential=(
            ("Searching the archive for photos of Antwerp Central Station.", "search_assets",
             {"query": "Antwerpen-Centraal station"}, "58 assets in 4 collections, earliest 1905"),
            ("Reading up on the 1950s dock strikes in Antwerp.", "web_search",
             {"query": "Antwerp dock strike 1950s history"},
             "Dockworkers in Antwerp struck in 1957 over wages; the port employed about 15,000 at the time."),
        ),
        unrelated=(
            ("Looking up the bus route from the museum to the airport.", "get_directions",
             {"from": "Harbour Museum", "to": "airport", "mode": "transit"},
             "Bus 51 then tram 3, 48 min, departs every 15 min"),
            ("Comparing prices of a USB-C hub.", "web_search", {"query": "USB-C hub 7 in 1 price"},
             "7-in-1 hubs from 24.99 EUR to 59.90 EUR; most include HDMI 4K and SD card reader"),
        ),
        lasting={
            "permission": ("Applying the tags to coll_0412.", "bulk_update_metadata", {"collection": "coll_0412"},
                           "ERROR: 403: collection coll_0412 is locked by the registrar; metadata edits need the Archivist role"),
            "not_found": ("Searching coll_0412.", "search_assets", {"collection": "coll_0412"},
                          "ERROR: collection 'coll_0412' not found"),
            "unsupported": ("Writing the keywords into the photos.", "bulk_update_metadata", {"collection": "coll_0412"},
                            "ERROR: metadata writes are not supported for this collection: its masters are read-only TIFF originals"),
        },
        transient=("Trying the batch update again.", "bulk_update_metadata", {"collection": "coll_0412"},
                   "ERROR: 503 Service Unavailable: search index is rebuilding, try again in a few minutes"),
        poll=("Watching batch bt_3307.", "get_batch_job", {"job": "bt_3307"},
              ("bt_3307: running, 120/214 assets", "bt_3307: running, 120/214 assets",
               "bt_3307: finished, 214/214 assets, 0 failed")),
        page=("Paging through the photos of coll_0412.", "list_assets", {"collection": "coll_0412", "per_page": 100},
              ("IMG_0001 ... IMG_0100 (100 of 214)", "IMG_0101 ... IMG_0200 (200 of 214)",
               "IMG_0201 ... IMG_0214 (214 of 214)")),
        cannot="coll_0412 is locked by the registrar and my account lacks the Archivist role, so I cannot tag these "
        "photos.",
        risk_tools={"search_assets": "read_only", "bulk_update_metadata": "reversible", "get_batch_job": "read_only",
                    "delete_assets": "irreversible"},
    ),
    Domain(
        name="press_release",
        split="train",
        goal="Issue Halvorsen Robotics' press release on its 42 million USD Series B led by Northgate Ventures: "
        "use the approved draft v4, confirm legal sign-off, schedule it on the BizWire newswire and on the company "
        "newsroom for 2025-11-04 08:00 ET, then email both confirmations to comms@halvorsen.io.",
        criteria=(
            "legal sign-off on draft v4 is confirmed",
            "the release is scheduled on BizWire for 2025-11-04 08:00 ET",
            "the newsroom post is scheduled for the same time",
            "comms@halvorsen.io has both confirmations",
        ),
        steps=(
            ("Opening the approved draft.", "get_document", {"drive": "Comms", "name": "Press release - Series B v4"},
             "doc_88a1 'Press release - Series B v4', 512 words, headline 'Halvorsen Robotics raises $42M Series B led by Northgate Ventures', last edited 2025-11-01 by L. Brandt"),
            ("Need to see legal's sign-off before anything goes out.", "list_comments", {"doc": "doc_88a1"},
             "3 comments; latest: M. Okafor (Legal), 2025-11-02 16:40: 'Approved v4 for release. Keep the forward-looking statements paragraph.' [resolved]"),
            ("Legal approved v4. Creating the release on BizWire from doc_88a1.", "create_newswire_release",
             {"source_doc": "doc_88a1", "circuit": "US1 National + Technology"},
             "{\"release_id\": \"nw_58213\", \"status\": \"draft\", \"circuit\": \"US1 National + Technology\", \"words\": 512, \"estimated_cost_usd\": 1150}"),
            ("Scheduling nw_58213 for Tuesday at 08:00 Eastern.", "schedule_release",
             {"release_id": "nw_58213", "at": "2025-11-04T08:00:00-05:00"},
             "nw_58213 scheduled for 2025-11-04 08:00 ET (13:00 UTC); confirmation SCH-77120"),
            ("Queueing the newsroom post for the same minute.", "create_newsroom_post",
             {"source_doc": "doc_88a1", "slug": "series-b", "publish_at": "2025-11-04T08:00:00-05:00"},
             "post np_1904 scheduled for 2025-11-04 08:00 ET at https://halvorsen.io/news/series-b"),
            ("Sending the comms team both confirmations.", "send_email",
             {"to": "comms@halvorsen.io", "subject": "Series B release scheduled: BizWire SCH-77120, newsroom np_1904"},
             "250 OK: message <c7e1.2291@mail.halvorsen.io> accepted for comms@halvorsen.io"),
        ),
        final_good="The Series B release (draft v4, doc_88a1) is set: legal signed off on v4 (M. Okafor, 2025-11-02); "
        "BizWire release nw_58213 is scheduled for 2025-11-04 08:00 ET, confirmation SCH-77120; newsroom post np_1904 "
        "goes live at the same time at https://halvorsen.io/news/series-b; and both confirmations were emailed to "
        "comms@halvorsen.io.",
        final_partial="Legal's sign-off on v4 is confirmed and BizWire draft nw_58213 exists, but it is not scheduled "
        "yet; the newsroom post and the email to comms@halvorsen.io are also still to do.",
        final_claim="The press release is all lined up and the team is in the loop.",
        related=(
            ("Cross-checking the amount and lead investor against the term sheet summary.", "get_document",
             {"drive": "Finance", "name": "Series B term sheet summary"},
             "Series B: 42,000,000 USD; lead Northgate Ventures; participants Fjell Capital, Orbis Partners; closing 2025-10-28"),
            ("Confirming the 'About Halvorsen Robotics' boilerplate is the current one.", "get_document",
             {"drive": "Brand", "name": "Company boilerplate 2025"},
             "About Halvorsen Robotics: founded 2019 in Pittsburgh, builds autonomous pallet-handling robots; 140 employees (updated 2025-09)"),
        ),
        partly=(
            ("Drafting a LinkedIn post to go with the announcement.", "create_social_draft",
             {"network": "linkedin", "text": "We raised $42M to bring autonomous pallet handling to more warehouses."},
             "LinkedIn draft sd_402 saved (not published)"),
            ("Putting together a list of robotics reporters to pitch.", "search_media_contacts",
             {"beat": "robotics", "region": "US"},
             "27 contacts, e.g. R. Tanaka (The Robot Report), E. Lowe (TechCrunch), S. Patel (Axios Pro)"),
        ),
        tangential=(
            ("Looking at other robotics funding rounds announced this year.", "web_search",
             {"query": "robotics startup Series B funding 2025"},
             "Notable 2025 robotics Series B rounds: 35M, 60M and 80M USD, mostly warehouse automation."),
            ("Browsing Northgate Ventures' portfolio page.", "fetch_url", {"url": "https://northgate.vc/portfolio"},
             "Portfolio: 41 companies in logistics, industrial software and climate; recent: Tidewell, Kestrel Labs"),
        ),
        unrelated=(
            ("Checking whether the parking garage has spaces on Thursday.", "get_parking_availability",
             {"site": "HQ garage", "date": "2025-11-06"}, "HQ garage, Nov 6: 14 spaces free"),
            ("Looking up the recycling pickup schedule.", "web_search", {"query": "Pittsburgh recycling pickup schedule"},
             "Recycling is collected every other week; next pickup Nov 7."),
        ),
        lasting={
            "permission": ("Scheduling the release on BizWire.", "schedule_release", {"release_id": "nw_58213"},
                           "ERROR: 403: user 'comms-agent' is not authorised to submit releases for distribution on account HALV-0042"),
            "not_found": ("Opening draft v4.", "get_document", {"drive": "Comms", "name": "Press release - Series B v4"},
                          "ERROR: no document named 'Press release - Series B v4' in drive 'Comms'"),
            "unsupported": ("Scheduling nw_58213 for 08:00 ET.", "schedule_release", {"release_id": "nw_58213"},
                            "ERROR: scheduled distribution is not supported on the Starter circuit; releases are sent on submission"),
        },
        transient=("Creating the BizWire release again.", "create_newswire_release", {"source_doc": "doc_88a1"},
                   "ERROR: 502 Bad Gateway from newswire API (request 9c1f7e); temporary, retry shortly"),
        poll=("Checking BizWire's editorial review of nw_58213.", "get_release_status", {"release_id": "nw_58213"},
              ("nw_58213: editorial review pending", "nw_58213: editorial review pending",
               "nw_58213: editorial review passed, ready for distribution")),
        page=("Reading the outlets on the US1 circuit.", "list_circuit_outlets", {"circuit": "US1 National"},
              ("outlets 1-50: Associated Press, Bloomberg Terminal, MarketWatch, ...",
               "outlets 51-100: Boston Globe online, Denver Post online, ...",
               "outlets 101-134: Pittsburgh Business Times, Tampa Bay Times online, ...")),
        cannot="My BizWire user is not allowed to submit releases for distribution on account HALV-0042, so I cannot "
        "schedule the Series B release; someone with distribution rights has to do it.",
        risk_tools={"get_document": "read_only", "create_newswire_release": "reversible", "schedule_release": "irreversible",
                    "create_newsroom_post": "reversible", "send_email": "irreversible"},
    ),
)  # fmt: skip
