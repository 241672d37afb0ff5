# ruff: noqa: E501  (data: long literal lines read better unbroken)
"""Scripted trajectories for the development set: four laboratory and research-computing domains (own work, Apache-2.0).

Plasma samples moved between freezers in a LIMS with a chain-of-custody record, a survey dataset cleaned and
published as a new version, a churn model retrained and promoted only if it beats production, and observing time
booked on a telescope for a dark night. Each domain is a task with its acceptance criteria, the on-goal steps that
solve it, pools of off-goal steps (related, partly related, tangential, unrelated), lasting and passing errors, a
polled job, a paged list and three final answers; ``build_devset.py`` turns them into labelled states.
"""

from __future__ import annotations

from _domain import Domain

DOMAINS: tuple[Domain, ...] = (
    # ---------------------------------------------------------------- test domain
    Domain(
        name="lab_sample_tracking",
        split="test",
        goal="Before freezer F-03 goes down for maintenance on June 18, move the 12 plasma aliquots of batch PB-2291 "
        "(study ONC-114) to freezer F-07 rack C, confirm they saw no temperature excursion while stored in F-03, and "
        "record the chain-of-custody entry for the transfer in the LIMS.",
        criteria=(
            "all 12 aliquots of batch PB-2291 are in F-07 rack C and the LIMS shows the new location",
            "the F-03 temperature log shows no excursion above -70C while the batch was stored there",
            "a chain-of-custody entry for the transfer is recorded",
        ),
        steps=(
            ("First I need to know where batch PB-2291 sits right now.", "lims_search_samples",
             {"batch": "PB-2291", "study": "ONC-114"},
             "12 samples | study ONC-114 | EDTA plasma 0.5 mL | S-2291-01..S-2291-12 | F-03/shelf 2/rack A/box 14, pos A1-A12 | status IN_STORAGE | received 2025-03-11"),
            ("Pulling the F-03 temperature log from the day the batch arrived until today.", "get_freezer_log",
             {"freezer": "F-03", "from": "2025-03-11", "to": "2025-06-16"},
             "F-03 setpoint -80.0C | 138,240 readings | min -83.1C max -76.4C | alarms 0 | excursions > -70C: 0 | door-open events 57 (longest 48 s)"),
            ("Box 14 needs a free slot in F-07 rack C; looking at what is open there.", "get_rack_map",
             {"freezer": "F-07", "rack": "C"},
             "F-07 rack C: 9 slots, 6 occupied; free C4, C5, C9 | box format 133x133x52 mm OK | F-07 now -80.6C"),
            ("Slot C4 is free. Transferring box 14 with all 12 aliquots from F-03 to F-07/C/C4.", "transfer_samples",
             {"samples": "S-2291-01..S-2291-12", "from": "F-03/2/A/14", "to": "F-07/C/C4"},
             "Transfer TRF-50831 completed: 12/12 tubes scanned out of F-03/2/A/14 and into F-07/C/C4; LIMS locations updated; time outside -70C: 3 min 12 s"),
            ("Writing the custody record for TRF-50831.", "record_custody",
             {"transfer": "TRF-50831", "samples": "S-2291-01..S-2291-12", "reason": "F-03 maintenance 2025-06-18", "released_by": "M. Okafor"},
             "Chain-of-custody entry COC-77412 saved: 12 samples, F-03/2/A/14 -> F-07/C/C4, released by M. Okafor, received by storage (auto), 2025-06-16 10:42"),
        ),
        final_good="Batch PB-2291 (12 EDTA plasma aliquots S-2291-01..12, study ONC-114) is now in F-07 rack C slot C4: "
        "transfer TRF-50831 scanned 12/12 tubes and updated the LIMS, 3 min 12 s outside -70C. The F-03 log from "
        "2025-03-11 to 2025-06-16 shows min -83.1C, max -76.4C and 0 excursions above -70C. Chain-of-custody entry "
        "COC-77412 is recorded for the transfer.",
        final_partial="I located the 12 PB-2291 aliquots in F-03/2/A box 14 and the F-03 log shows no excursion "
        "(max -76.4C), but the box has not been moved to F-07 rack C yet and there is no chain-of-custody entry.",
        final_claim="The samples have been moved and everything is recorded. All good.",
        related=(
            ("Before moving anything, making sure none of the PB-2291 aliquots is on hold or checked out.",
             "lims_get_sample_flags", {"batch": "PB-2291"},
             "12 samples: on_hold 0 | checked_out 0 | pending requests 0 | consent status ACTIVE"),
            ("Reading the storage SOP for freezer-to-freezer moves.", "get_document", {"id": "SOP-STO-012"},
             "SOP-STO-012 rev 4: move frozen samples on dry ice; max 5 min outside -70C storage; chain-of-custody entry within 24 h of the move."),
        ),
        partly=(
            ("F-03 holds other boxes that also need a home before the 18th; listing them.", "lims_list_contents",
             {"freezer": "F-03"},
             "F-03: 46 boxes | ONC-114 boxes 14-19 | CARD-207 boxes 1-22 | NEU-031 boxes 3-20 | 2 unlabelled"),
            ("Opening a facilities request for the F-03 defrost once it is empty.", "create_facilities_request",
             {"asset": "F-03", "type": "defrost and service", "date": "2025-06-18"},
             "Request FAC-3318 created: F-03 defrost and service, 2025-06-18 08:00, assigned to Biotech Services"),
        ),
        tangential=(
            ("Looking at the ONC-114 protocol amendment history.", "get_document", {"id": "ONC-114-protocol"},
             "ONC-114 protocol: v1.0 2024-09-02; amendment 1 2025-01-20 (added visit 6); amendment 2 2025-04-08 (eGFR exclusion)"),
            ("Checking F-07's energy use over the last quarter.", "get_asset_report", {"asset": "F-07", "metric": "kwh"},
             "F-07: 1,940 kWh in Q1 2025 (+6% vs Q4 2024); compressor duty cycle 71%"),
        ),
        unrelated=(
            ("Reordering 200 uL filter tips for the teaching lab.", "create_purchase_order",
             {"item": "filter tips 200 uL", "qty": 20},
             "PO 4410-2291 drafted: 20 racks of filter tips 200 uL, 96.00 EUR, awaiting approval"),
            ("Finding the time of Thursday's departmental seminar.", "get_calendar", {"calendar": "dept-seminars"},
             "Thu 12:30, room B2.14: 'Cryo-EM of membrane transporters' (guest speaker)"),
        ),
        lasting={
            "permission": ("Transferring box 14 to F-07/C/C4.", "transfer_samples",
                           {"samples": "S-2291-01..S-2291-12", "from": "F-03/2/A/14", "to": "F-07/C/C4"},
                           "ERROR: 403 Forbidden: user svc-lab-agent lacks privilege storage.transfer on F-07 (restricted BSL-2 suite)"),
            "not_found": ("Looking up batch PB-2291.", "lims_search_samples", {"batch": "PB-2291", "study": "ONC-114"},
                          "ERROR: no samples match batch 'PB-2291' in study ONC-114"),
            "unsupported": ("Recording the chain-of-custody entry.", "record_custody", {"transfer": "TRF-50831"},
                            "ERROR: electronic custody records are not supported for study ONC-114 (sponsor requires paper form CF-2)"),
        },
        transient=("Trying the transfer to F-07/C/C4 again.", "transfer_samples",
                   {"samples": "S-2291-01..S-2291-12", "from": "F-03/2/A/14", "to": "F-07/C/C4"},
                   "ERROR: 504 Gateway Timeout from LIMS; request not processed, retry"),
        poll=("Is the storage robot done with the transfer?", "get_transfer_status", {"transfer": "TRF-50831"},
              ("TRF-50831: QUEUED (robot busy, 1 job ahead)", "TRF-50831: QUEUED (robot busy, 1 job ahead)",
               "TRF-50831: COMPLETED, 12/12 tubes placed in F-07/C/C4")),
        page=("Going through the aliquot list for the batch.", "lims_list_samples", {"batch": "PB-2291"},
              ("S-2291-01 A1 0.50 mL; S-2291-02 A2 0.50 mL; S-2291-03 A3 0.50 mL; S-2291-04 A4 0.48 mL",
               "S-2291-05 A5 0.50 mL; S-2291-06 A6 0.50 mL; S-2291-07 A7 0.49 mL; S-2291-08 A8 0.50 mL",
               "S-2291-09 A9 0.50 mL; S-2291-10 A10 0.50 mL; S-2291-11 A11 0.50 mL; S-2291-12 A12 0.47 mL")),
        cannot="My account has no storage.transfer privilege on freezer F-07, so I cannot move batch PB-2291 there; "
        "someone with transfer rights on the BSL-2 suite has to do the move.",
        risk_tools={"lims_search_samples": "read_only", "get_freezer_log": "read_only",
                    "transfer_samples": "reversible", "record_custody": "regulated", "dispose_samples": "irreversible"},
    ),
    # ---------------------------------------------------------------- train domains
    Domain(
        name="dataset_cleaning",
        split="train",
        goal="Clean raw/survey_2024_wave3.csv of the household panel: remove duplicate respondents, convert the income "
        "answers to EUR using the ECB rates of 2024-10-01, drop speeders who took under 120 seconds, and publish the "
        "result as version 3.1 in the data catalogue with a changelog.",
        criteria=(
            "duplicate respondent ids removed",
            "income converted to EUR with the ECB rates of 2024-10-01",
            "responses under 120 seconds dropped",
            "the cleaned dataset published as v3.1 with a changelog",
        ),
        steps=(
            ("Profiling the raw file to see what needs fixing.", "profile_dataset", {"path": "raw/survey_2024_wave3.csv"},
             "8,412 rows x 64 cols | respondent_id: 8,377 unique, 35 duplicated | income_ccy: EUR 7,901, GBP 311, CHF 200 | duration_s: min 41, median 914 | q17 missing 3.2%"),
            ("35 repeated ids. Keeping the latest submission per respondent.", "run_python",
             {"code": "df = df.sort_values('submitted_at').drop_duplicates('respondent_id', keep='last')"},
             "dropped 35 rows; 8,377 rows remain; respondent_id now unique"),
            ("Fetching the ECB reference rates for 2024-10-01.", "get_exchange_rates",
             {"base": "EUR", "date": "2024-10-01", "symbols": "GBP,CHF"},
             '{"date": "2024-10-01", "base": "EUR", "rates": {"GBP": 0.8328, "CHF": 0.9431}, "source": "ECB"}'),
            ("Converting GBP and CHF incomes into a new income_eur column.", "run_python",
             {"code": "df['income_eur'] = df.income / df.income_ccy.map({'EUR': 1, 'GBP': 0.8328, 'CHF': 0.9431})"},
             "income_eur filled for 8,377 rows: 7,869 EUR unchanged, 309 GBP and 199 CHF converted; 0 nulls"),
            ("Now the speeders: dropping rows with duration_s < 120 and writing the clean file.", "run_python",
             {"code": "df = df[df.duration_s >= 120]; df.to_csv('clean/survey_2024_wave3_v3.1.csv', index=False)"},
             "dropped 142 rows; 8,235 rows x 65 cols written to clean/survey_2024_wave3_v3.1.csv"),
            ("Publishing v3.1 to the catalogue with the changelog.", "publish_dataset",
             {"name": "survey_2024_wave3", "version": "3.1", "file": "clean/survey_2024_wave3_v3.1.csv",
              "changelog": "-35 duplicate respondents; income_eur added (ECB 2024-10-01); -142 speeders < 120 s"},
             "Published survey_2024_wave3 v3.1 (id ds-4471-v3.1): 8,235 rows, 65 cols, sha256 9f3c07e2...e21a; changelog attached"),
        ),
        final_good="survey_2024_wave3 v3.1 is published (ds-4471-v3.1, 8,235 rows x 65 cols) with a changelog: 35 "
        "duplicate respondent rows removed (latest submission kept), income converted into income_eur with the ECB "
        "2024-10-01 rates (GBP 0.8328, CHF 0.9431; 309 GBP and 199 CHF answers converted), and 142 speeders under "
        "120 s dropped.",
        final_partial="Duplicates are removed (35 rows) and income_eur is computed with the ECB 2024-10-01 rates; the "
        "speeders under 120 s are not dropped yet and v3.1 has not been published to the catalogue.",
        final_claim="The dataset is clean and published, ready for analysis.",
        related=(
            ("Reading the codebook entries for income and income_ccy before touching them.", "read_codebook",
             {"dataset": "survey_2024_wave3", "vars": "income,income_ccy"},
             "income: net monthly household income, numeric, top-coded at 25,000 | income_ccy: ISO 4217 code of the currency the answer was given in"),
            ("Are the duplicated ids resubmissions or id collisions? Comparing their answers.", "run_python",
             {"code": "dups = df[df.respondent_id.duplicated(keep=False)]; dups.groupby('respondent_id').nunique().max(axis=1).describe()"},
             "35 duplicated ids: 31 identical apart from submitted_at, 4 differ in 1-3 answers; all resubmitted within 2 days"),
        ),
        partly=(
            ("Filling the missing q17 answers with the median.", "run_python",
             {"code": "df['q17'] = df.q17.fillna(df.q17.median())"}, "q17: 270 missing values filled with 4.0"),
            ("Computing post-stratification weights against the census margins.", "run_python",
             {"code": "w = rake(df, margins='census_2021_nl.json')"},
             "raking converged in 7 iterations; weights 0.41-2.87; design effect 1.38"),
        ),
        tangential=(
            ("Checking what the wave 4 questionnaire draft adds.", "read_file", {"path": "docs/wave4_questionnaire_draft.md"},
             "Wave 4 draft: new block q65-q70 on energy costs; q22 reworded; fieldwork planned for March 2025"),
            ("Looking up how household income inequality moved in Europe lately.", "web_search",
             {"query": "EU household income Gini 2023"},
             "Eurostat: Gini coefficient of equivalised disposable income 29.6 in the EU in 2023, down from 29.7."),
        ),
        unrelated=(
            ("Searching train times to Utrecht for Thursday morning.", "search_trains",
             {"from": "Amsterdam Centraal", "to": "Utrecht Centraal", "date": "Thursday"},
             "07:44 IC 3517 (27 min); 07:58 IC 2818 (26 min); 08:14 IC 3519 (27 min)"),
            ("Renewing the team's shared drive storage plan.", "billing_update_plan", {"plan": "team-2TB"},
             "Plan team-2TB renewed until 2026-01-31; 9.99 EUR/month"),
        ),
        lasting={
            "permission": ("Publishing v3.1 to the catalogue.", "publish_dataset",
                           {"name": "survey_2024_wave3", "version": "3.1"},
                           "ERROR: 403 Forbidden: role 'analyst' cannot publish to collection household-panel (data-steward required)"),
            "not_found": ("Opening the raw survey file.", "profile_dataset", {"path": "raw/survey_2024_wave3.csv"},
                          "ERROR: FileNotFoundError: [Errno 2] No such file or directory: 'raw/survey_2024_wave3.csv'"),
            "unsupported": ("Getting the exchange rates for 2024-10-01.", "get_exchange_rates",
                            {"base": "EUR", "date": "2024-10-01", "symbols": "GBP,CHF"},
                            "ERROR: historical rates are not supported on the free plan (latest rates only)"),
        },
        transient=("Fetching the ECB rates once more.", "get_exchange_rates",
                   {"base": "EUR", "date": "2024-10-01", "symbols": "GBP,CHF"},
                   "ERROR: 429 Too Many Requests: rate limit reached, retry after 20 s"),
        poll=("The catalogue validates uploads asynchronously; checking on it.", "get_publish_job", {"job": "pub-1187"},
              ("pub-1187: VALIDATING (schema check, 65 columns)", "pub-1187: VALIDATING (schema check, 65 columns)",
               "pub-1187: PUBLISHED as ds-4471-v3.1")),
        page=("Reading through the rows flagged as speeders.", "read_rows",
              {"path": "raw/survey_2024_wave3.csv", "where": "duration_s < 120"},
              ("rows 1-50 of 142: R10233 41 s, R10877 58 s, R11402 63 s ...",
               "rows 51-100 of 142: R20418 94 s, R20555 97 s, R21090 101 s ...",
               "rows 101-142 of 142: R30771 108 s, R31004 113 s, R31522 119 s ...")),
        cannot="My analyst role cannot publish to the household-panel collection, so v3.1 cannot go into the "
        "catalogue from here; a data steward has to publish it.",
        risk_tools={"profile_dataset": "read_only", "run_python": "reversible", "publish_dataset": "irreversible",
                    "export_microdata": "regulated"},
    ),
    Domain(
        name="ml_model_retraining",
        split="train",
        goal="Retrain the churn model churn-gbm on data up to 2025-05-31, compare it with production v12 (validation "
        "AUC 0.842), promote the new version to production only if its AUC is higher, and report its metrics.",
        criteria=(
            "churn-gbm retrained on data through 2025-05-31",
            "the new version compared with v12 on the same validation set",
            "the new version promoted to production only if its AUC beats 0.842",
            "the new version's metrics reported",
        ),
        steps=(
            ("Building the training snapshot through May 31.", "create_feature_snapshot",
             {"feature_view": "churn_features", "end": "2025-05-31"},
             "snapshot fs-20250531: 1,284,552 rows, 87 features, positives 6.9%, time split train <= 2025-04-30 < valid"),
            ("Kicking off training with the standard config on fs-20250531.", "launch_training_job",
             {"model": "churn-gbm", "snapshot": "fs-20250531", "config": "configs/churn_gbm.yaml"},
             "job tr-9034 SUCCEEDED in 41 min; registered churn-gbm v13 (s3://ml-models/churn-gbm/13/)"),
            ("v13 against v12 on the May validation window.", "compare_models",
             {"candidate": "churn-gbm:13", "baseline": "churn-gbm:12", "dataset": "fs-20250531/valid"},
             "valid n=212,040 | AUC v13 0.857 vs v12 0.842 (+0.015, 95% CI +0.009..+0.021) | logloss 0.201 vs 0.209 | ECE 0.011 vs 0.014"),
            ("AUC 0.857 beats 0.842, so promoting v13.", "deploy_model",
             {"model": "churn-gbm", "version": 13, "stage": "production"},
             "churn-gbm v13 -> Production; endpoint churn-scoring now serves v13; v12 -> Archived (rollback available); health check OK"),
        ),
        final_good="Retrained churn-gbm on data through 2025-05-31 (snapshot fs-20250531, job tr-9034) as v13. On the "
        "May validation set (212,040 rows) v13 reaches AUC 0.857 vs 0.842 for v12 (+0.015, CI +0.009..+0.021), "
        "logloss 0.201 vs 0.209, ECE 0.011. Since it beats v12, v13 is promoted to production on churn-scoring; v12 "
        "is archived for rollback.",
        final_partial="v13 is trained on data through 2025-05-31 (job tr-9034), but I have not compared it with v12 "
        "yet, so nothing is promoted and there are no metrics to report.",
        final_claim="Retraining done, the new model is better and live.",
        related=(
            ("Are the labels for the late-May cohort already closed? Checking before I snapshot.", "run_sql",
             {"query": "SELECT max(label_date), count(*) FROM churn_labels WHERE cohort_date >= '2025-05-01'"},
             "max(label_date) 2025-06-30 | 214,877 rows (30-day window closed for the May 31 cohort)"),
            ("Pulling v12's registry entry for its reference metrics.", "get_model_version",
             {"model": "churn-gbm", "version": 12},
             "churn-gbm v12 | Production since 2025-03-10 | trained to 2025-02-28 | valid AUC 0.842 | 87 features"),
        ),
        partly=(
            ("Launching a small hyperparameter sweep in case a deeper model does better.", "launch_sweep",
             {"model": "churn-gbm", "grid": {"num_leaves": [63, 127], "learning_rate": [0.03, 0.05]}},
             "sweep sw-211 started: 4 trials queued"),
            ("Generating SHAP feature importances for v13.", "explain_model", {"model": "churn-gbm:13", "method": "shap"},
             "top features: days_since_last_login 0.21, support_tickets_90d 0.12, plan_downgrade 0.09, tenure_months 0.08"),
        ),
        tangential=(
            ("Looking at last quarter's churn rate on the retention dashboard.", "get_dashboard",
             {"name": "retention-overview", "period": "2025-Q1"},
             "Q1 2025 monthly churn 2.4% (Q4 2024 2.6%); enterprise 0.9%, self-serve 3.8%"),
            ("Reading how other companies define churn for subscription products.", "web_search",
             {"query": "churn definition subscription voluntary involuntary"},
             "Voluntary churn is a customer cancelling; involuntary churn comes from failed payments."),
        ),
        unrelated=(
            ("Swapping my on-call shift next Tuesday.", "update_oncall", {"schedule": "data-platform", "date": "Tuesday"},
             "Shift swapped with K. Yamada for Tue 09:00-17:00"),
            ("Looking for a restaurant for the team dinner.", "search_places", {"query": "restaurant group of 10 near office"},
             "3 results: Osteria Verde (4.6), Kanpai (4.4), The Larder (4.3)"),
        ),
        lasting={
            "permission": ("Promoting v13 to production.", "deploy_model",
                           {"model": "churn-gbm", "version": 13, "stage": "production"},
                           "ERROR: 403: service account ml-retrain-bot may not transition models to stage Production (ml-release approvers only)"),
            "not_found": ("Building the training snapshot.", "create_feature_snapshot",
                          {"feature_view": "churn_features", "end": "2025-05-31"},
                          "ERROR: feature view 'churn_features' not found in project growth-ml"),
            "unsupported": ("Comparing v13 with v12.", "compare_models",
                            {"candidate": "churn-gbm:13", "baseline": "churn-gbm:12"},
                            "ERROR: comparing versions with different feature schemas is not supported (v12 schema 4, v13 schema 5)"),
        },
        transient=("Resubmitting the training job.", "launch_training_job",
                   {"model": "churn-gbm", "snapshot": "fs-20250531", "config": "configs/churn_gbm.yaml"},
                   "ERROR: 503 Service Unavailable from ml-platform API; try again in a minute"),
        poll=("Training is still going; checking the job.", "get_training_job", {"job": "tr-9034"},
              ("tr-9034: RUNNING, boosting round 600/1500", "tr-9034: RUNNING, boosting round 600/1500",
               "tr-9034: SUCCEEDED, churn-gbm v13 registered")),
        page=("Listing earlier versions of churn-gbm.", "list_model_versions", {"model": "churn-gbm"},
              ("v12 2025-02-28 AUC 0.842 Production; v11 2024-11-30 AUC 0.836 Archived",
               "v10 2024-08-31 AUC 0.831 Archived; v9 2024-05-31 AUC 0.829 Archived",
               "v8 2024-02-29 AUC 0.818 Archived; v7 2023-11-30 AUC 0.815 Archived")),
        cannot="The ml-retrain-bot account is not allowed to move models to Production, so I cannot promote v13; "
        "an ml-release approver has to do it.",
        risk_tools={"compare_models": "read_only", "launch_training_job": "reversible", "deploy_model": "reversible",
                    "delete_model_version": "irreversible", "export_training_data": "regulated"},
    ),
    Domain(
        name="telescope_time_booking",
        split="train",
        goal="Book 3 hours on the 2.5 m telescope T25 with the ESPR echelle spectrograph on a night between October 14 "
        "and 18, 2025 when the Moon is under 30% illuminated, for programme P-2025B-017, and email the booking "
        "confirmation to the PI, Dr. Ana Ferreira.",
        criteria=(
            "a 3-hour T25/ESPR slot booked between October 14 and 18, 2025 for P-2025B-017",
            "the Moon is under 30% illuminated on the booked night",
            "the confirmation emailed to Dr. Ana Ferreira",
        ),
        steps=(
            ("What is free on T25 with ESPR from October 14 to 18, and how bright is the Moon?", "get_schedule",
             {"telescope": "T25", "instrument": "ESPR", "from": "2025-10-14", "to": "2025-10-18"},
             "free (UT): Oct 14 22:00-02:30 Moon 47% | Oct 15 none | Oct 16 01:00-05:30 Moon 27% | Oct 17 20:30-23:00 Moon 18% | Oct 18 23:30-04:30 Moon 11%"),
            ("Oct 17 has only 2.5 h free; Oct 16 has 4.5 h at 27% Moon. Booking 01:00-04:00 UT on Oct 16.", "book_slot",
             {"telescope": "T25", "instrument": "ESPR", "programme": "P-2025B-017",
              "start": "2025-10-16T01:00Z", "end": "2025-10-16T04:00Z"},
             "Booking BK-25B-0932 accepted: T25/ESPR 2025-10-16 01:00-04:00 UT (3.0 h), P-2025B-017; 3.0 of 12.0 h allocated now used"),
            ("Sending the confirmation to Dr. Ferreira.", "send_email",
             {"to": "a.ferreira@astro.example.org", "subject": "T25/ESPR booking BK-25B-0932, 16 Oct 2025 01:00-04:00 UT"},
             "Sent to a.ferreira@astro.example.org, message id 8c1f02"),
        ),
        final_good="Booked T25 with ESPR for P-2025B-017 on 2025-10-16, 01:00-04:00 UT (3.0 h, booking BK-25B-0932); "
        "the Moon is 27% illuminated that night, under 30%. The confirmation went to Dr. Ana Ferreira at "
        "a.ferreira@astro.example.org (message 8c1f02). The programme has 9.0 of its 12.0 h left.",
        final_partial="I found a free 4.5 h ESPR block on October 16 (Moon 27%), but nothing is booked yet and Dr. "
        "Ferreira has not been emailed.",
        final_claim="Your telescope time is booked and the PI has been told.",
        related=(
            ("How much time does P-2025B-017 have left this semester?", "get_programme", {"id": "P-2025B-017"},
             "P-2025B-017 | PI A. Ferreira | T25/ESPR | 12.0 h allocated in 2025B, 0.0 h used | constraint: Moon illumination < 0.3"),
            ("Double-checking the Moon for the night of October 16 in the almanac.", "get_almanac",
             {"site": "T25", "date": "2025-10-16"},
             "2025-10-16: Moon 27% illuminated, waning, rises 01:12 UT | astronomical twilight ends 19:48 UT, starts 05:51 UT"),
        ),
        partly=(
            ("Preparing observing blocks for the P-2025B-017 targets.", "create_observing_block",
             {"programme": "P-2025B-017", "target": "HD 20794", "exposure_s": 1800},
             "OB 55120 created: HD 20794, ESPR R=60000, 3 x 1800 s, airmass < 1.6"),
            ("Reserving a room at the observatory residence for the observer.", "book_lodging",
             {"site": "T25", "checkin": "2025-10-15", "checkout": "2025-10-16"},
             "Room 12 reserved at the residence, 15-16 Oct, reference RES-4471"),
        ),
        tangential=(
            ("Looking up the September 7, 2025 lunar eclipse.", "web_search", {"query": "total lunar eclipse 7 September 2025"},
             "Total lunar eclipse on 2025-09-07, totality 82 min, visible from Asia, Africa and Europe."),
            ("Listing papers from last year's programme P-2024B-017.", "search_papers",
             {"query": "P-2024B-017 ESPR"},
             "2 papers: Ferreira et al. 2025 (A&A 694, L3); Costa et al. 2025 (MNRAS 537, 1120)"),
        ),
        unrelated=(
            ("Checking the price of a second-hand road bike.", "web_search", {"query": "used road bike 56 cm price"},
             "Listings from 350 to 900 EUR for aluminium frames."),
            ("Updating the lab's coffee rota.", "edit_file", {"path": "rota/coffee.md", "patch": "swap week 42 and 43"},
             "Edited rota/coffee.md: 1 hunk, +2 -2 lines."),
        ),
        lasting={
            "permission": ("Booking T25/ESPR for October 16, 01:00-04:00 UT.", "book_slot",
                           {"telescope": "T25", "instrument": "ESPR", "programme": "P-2025B-017"},
                           "ERROR: 403: account obs-assistant is not a member of P-2025B-017; only programme members may book time"),
            "not_found": ("Booking the slot for P-2025B-017.", "book_slot",
                          {"telescope": "T25", "instrument": "ESPR", "programme": "P-2025B-017"},
                          "ERROR: programme P-2025B-017 not found in semester 2025B"),
            "unsupported": ("Booking a fixed 3 h slot with ESPR.", "book_slot",
                            {"telescope": "T25", "instrument": "ESPR", "programme": "P-2025B-017"},
                            "ERROR: fixed-time bookings are not supported for ESPR in 2025B (queue-scheduled; submit observing blocks instead)"),
        },
        transient=("Sending the booking request again.", "book_slot",
                   {"telescope": "T25", "instrument": "ESPR", "programme": "P-2025B-017",
                    "start": "2025-10-16T01:00Z", "end": "2025-10-16T04:00Z"},
                   "ERROR: 502 Bad Gateway from upstream; request not completed, try again shortly"),
        poll=("The night astronomer still has to approve it; checking the booking.", "get_booking", {"id": "BK-25B-0932"},
              ("BK-25B-0932: PENDING night-astronomer approval", "BK-25B-0932: PENDING night-astronomer approval",
               "BK-25B-0932: APPROVED by R. Kuiper")),
        page=("Reading the T25 schedule night by night.", "get_schedule",
              {"telescope": "T25", "from": "2025-10-14", "to": "2025-10-18"},
              ("Oct 14: 18:40-22:00 P-2025B-004 (Moreau); 22:00-02:30 free; 02:30-06:00 P-2025B-021",
               "Oct 15: 18:40-06:00 engineering (ESPR recoating check); Oct 16: 18:40-01:00 P-2025B-009, 01:00-05:30 free",
               "Oct 17: 20:30-23:00 free, 23:00-06:00 P-2025B-030; Oct 18: 18:40-23:30 P-2025B-012, 23:30-04:30 free")),
        cannot="The scheduler only lets members of P-2025B-017 book its time and my account is not one, so I cannot "
        "make the booking; Dr. Ferreira or a co-investigator has to book it.",
        risk_tools={"get_schedule": "read_only", "get_almanac": "read_only", "book_slot": "reversible",
                    "send_email": "irreversible"},
    ),
)  # fmt: skip
