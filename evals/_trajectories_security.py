# ruff: noqa: E501  (data: long literal lines read better unbroken)
"""Scripted trajectories for the development set: security operations tasks, written for stopwise (own work, Apache-2.0).

Four domains in the format of ``_trajectories.py``: a quarterly access review of an admin group, the triage of a
user-reported phishing email, the rotation of a leaked database password, and the patching of a vulnerable SSH
server. Each holds the on-goal steps in order, drift pools, lasting and passing errors, a polled job, a paged list
and final answers; ``build_devset.py`` turns them into labelled states.
"""

from __future__ import annotations

from _domain import Domain

DOMAINS: tuple[Domain, ...] = (
    # ---------------------------------------------------------------- test domain
    Domain(
        name="access_review",
        split="test",
        goal="Complete the Q2 2025 access review of the Okta group payments-prod-admin: check every member against "
        "the HR directory, remove anyone who has left the company or moved off the Payments teams, and record the "
        "outcome on review ticket GRC-1187 before June 30.",
        criteria=(
            "every member of payments-prod-admin checked against the HR directory",
            "departed or transferred members removed from payments-prod-admin",
            "the review outcome recorded on ticket GRC-1187",
        ),
        steps=(
            ("First I need the current membership of payments-prod-admin.", "list_group_members",
             {"group": "payments-prod-admin"},
             "7 members: a.okafor, j.lindqvist, m.santos, r.chen, t.becker, s.ivanova, svc-payments-deploy (service account)"),
            ("Cross-referencing the six human accounts with the HR directory.", "lookup_employees",
             {"usernames": ["a.okafor", "j.lindqvist", "m.santos", "r.chen", "t.becker", "s.ivanova"]},
             "a.okafor ACTIVE Payments Engineering | j.lindqvist TERMINATED 2025-05-16 | m.santos ACTIVE Payments SRE | "
             "r.chen ACTIVE Marketing Analytics (transferred from Payments Engineering 2025-04-01) | t.becker ACTIVE "
             "Payments Engineering | s.ivanova ACTIVE Payments SRE"),
            ("svc-payments-deploy is not in HR; its owner and last use decide whether it stays.", "get_service_account",
             {"name": "svc-payments-deploy"},
             "{\"name\": \"svc-payments-deploy\", \"owner\": \"t.becker\", \"purpose\": \"CI deploy pipeline payments-api\", "
             "\"status\": \"ACTIVE\", \"last_used\": \"2025-06-11T22:04:17Z\"}"),
            ("j.lindqvist left on May 16 but still holds admin; removing her.", "remove_group_member",
             {"group": "payments-prod-admin", "user": "j.lindqvist"},
             "Removed j.lindqvist from payments-prod-admin. Event evt_8f21a0c3. Active sessions revoked: 0."),
            ("r.chen now works in Marketing Analytics, so the admin grant goes too.", "remove_group_member",
             {"group": "payments-prod-admin", "user": "r.chen"},
             "Removed r.chen from payments-prod-admin. Event evt_8f21a7d9. Active sessions revoked: 1."),
            ("Writing the result of the review onto GRC-1187 and closing it.", "update_ticket",
             {"ticket": "GRC-1187", "status": "Review Complete",
              "comment": "7 members reviewed; removed j.lindqvist (terminated 2025-05-16) and r.chen (transferred 2025-04-01); 4 users and svc-payments-deploy (owner t.becker) retained"},
             "GRC-1187 updated: comment #5 added, status Open -> Review Complete (2025-06-18 10:32 UTC)."),
        ),
        final_good="Q2 access review of payments-prod-admin is done. All 7 members were checked: the 6 people against "
        "HR and svc-payments-deploy against its owner record (t.becker, last used 2025-06-11). Removed j.lindqvist "
        "(terminated 2025-05-16, event evt_8f21a0c3) and r.chen (moved to Marketing Analytics, event evt_8f21a7d9). "
        "a.okafor, m.santos, t.becker, s.ivanova and the service account stay. The outcome is on GRC-1187 (comment #5, "
        "status Review Complete, June 18, before the June 30 deadline).",
        final_partial="I have checked all seven members: j.lindqvist was terminated on 2025-05-16 and r.chen moved to "
        "Marketing Analytics. Neither has been removed from payments-prod-admin yet, and GRC-1187 is still not "
        "updated.",
        final_claim="The access review is finished and the group is clean now.",
        related=(
            ("Before removing anyone, reading the group's eligibility rule.", "get_group",
             {"group": "payments-prod-admin"},
             "payments-prod-admin: owner m.santos; eligibility: Payments Engineering or Payments SRE only; grants AWS role PaymentsProdAdmin"),
            ("Seeing whether r.chen has used the admin role since her transfer.", "get_user_activity",
             {"user": "r.chen", "app": "AWS payments-prod", "since": "2025-04-01"},
             "r.chen: 3 sign-ins to AWS payments-prod since 2025-04-01, last 2025-06-02 14:11 UTC (role PaymentsProdAdmin)"),
        ),
        partly=(
            ("The read-only sibling group probably has the same stale members; pulling it too.", "list_group_members",
             {"group": "payments-prod-readonly"},
             "11 members: a.okafor, b.ferreira, j.lindqvist, k.yamada, m.santos, ..."),
            ("Looking at MFA enrollment of the admins who remain.", "get_mfa_status",
             {"users": ["a.okafor", "m.santos", "t.becker", "s.ivanova"]},
             "a.okafor WebAuthn; m.santos WebAuthn; t.becker Okta Verify push; s.ivanova SMS only"),
        ),
        tangential=(
            ("Pulling up the Payments team's on-call rotation for June.", "get_oncall_schedule",
             {"team": "payments-sre", "month": "2025-06"},
             "June 2025: wk23 m.santos, wk24 s.ivanova, wk25 m.santos, wk26 s.ivanova"),
            ("Reading how Okta's access certification campaigns work.", "web_search",
             {"query": "Okta Identity Governance access certification campaign"},
             "Access certification campaigns let reviewers approve or revoke user access to resources on a schedule."),
        ),
        unrelated=(
            ("Finding a meeting room for Thursday's offsite planning.", "search_rooms",
             {"date": "2025-06-19", "capacity": 8},
             "Free rooms: Fjord (10), Birch (8) 13:00-17:00"),
            ("Converting 2,400 USD to euros for an expense question.", "convert_currency",
             {"amount": 2400, "from": "USD", "to": "EUR"}, "2,400.00 USD = 2,113.44 EUR (rate 0.8806)"),
        ),
        lasting={
            "permission": ("Removing j.lindqvist from payments-prod-admin.", "remove_group_member",
                           {"group": "payments-prod-admin", "user": "j.lindqvist"},
                           "ERROR: 403 E0000006: You do not have permission to perform the requested action (needs Group Membership Admin on payments-prod-admin)"),
            "not_found": ("Listing the members of payments-prod-admin.", "list_group_members",
                          {"group": "payments-prod-admin"},
                          "ERROR: 404 E0000007: Not found: Resource not found: payments-prod-admin (UserGroup)"),
            "unsupported": ("Removing r.chen from the group.", "remove_group_member",
                            {"group": "payments-prod-admin", "user": "r.chen"},
                            "ERROR: 400 E0000112: membership of payments-prod-admin is managed by a group rule and cannot be edited directly"),
        },
        transient=("Looking the members up in HR.", "lookup_employees",
                   {"usernames": ["a.okafor", "j.lindqvist", "m.santos"]},
                   "ERROR: 429 Too Many Requests: HR directory rate limit reached, retry after 30 s"),
        poll=("Waiting for the removals to reach AWS SSO.", "get_push_status",
              {"group": "payments-prod-admin", "app": "AWS payments-prod"},
              ("push: IN_PROGRESS, last successful sync 2025-06-18 10:14 UTC",
               "push: IN_PROGRESS, last successful sync 2025-06-18 10:14 UTC",
               "push: SUCCESS at 2025-06-18 10:29 UTC, 5 members synced")),
        page=("The member list is paged; reading on.", "list_group_members",
              {"group": "payments-prod-admin", "limit": 3},
              ("1-3 of 7: a.okafor, j.lindqvist, m.santos", "4-6 of 7: r.chen, t.becker, s.ivanova",
               "7-7 of 7: svc-payments-deploy")),
        cannot="This account lacks the Group Membership Admin role on payments-prod-admin, so I cannot remove the "
        "departed members and cannot complete the access review; someone with that role has to do the removals.",
        risk_tools={"list_group_members": "read_only", "lookup_employees": "read_only",
                    "remove_group_member": "reversible", "update_ticket": "reversible",
                    "delete_user": "irreversible"},
    ),
    # ---------------------------------------------------------------- train domains
    Domain(
        name="phishing_report_triage",
        split="train",
        goal="Triage phishing report PR-3318 sent by d.moreau (subject 'Action required: Payroll portal password "
        "expiry'): decide whether it is malicious, purge every copy from employee mailboxes and block the sending "
        "domain at the mail gateway.",
        criteria=(
            "a verdict on PR-3318 backed by header and link analysis",
            "every copy of the message purged from mailboxes",
            "the sending domain blocked at the mail gateway",
        ),
        steps=(
            ("Opening the reported message with its authentication results.", "get_reported_message",
             {"report": "PR-3318"},
             "From: \"Payroll Team\" <noreply@acme-payrol1.com> | Return-Path: bounce@mail.acme-payrol1.com | SPF=fail "
             "DKIM=none DMARC=fail | Received 2025-04-08 08:51 UTC | Link: hxxps://acme-payrol1[.]com/sso/login | "
             "Message-ID <7f3a.19c2@mail.acme-payrol1.com>"),
            ("Lookalike domain and failed SPF; running the link through URL reputation.", "url_reputation",
             {"url": "https://acme-payrol1.com/sso/login"},
             "verdict: MALICIOUS (credential phishing); 14/92 engines; domain registered 2025-04-06; page clones the Acme SSO login"),
            ("Confirmed malicious. Hard-deleting every copy across the tenant.", "purge_messages",
             {"query": "from:noreply@acme-payrol1.com received:2025-04-08", "action": "hard_delete"},
             "Purge job purge-9921 finished: 37 matching messages in 37 mailboxes, 37 hard-deleted, 0 failed."),
            ("Adding acme-payrol1.com to the gateway block list.", "block_sender_domain",
             {"domain": "acme-payrol1.com", "scope": ["sender", "url"]},
             "Block entry TBL-5520 created: acme-payrol1.com (sender and URL), expires: never."),
        ),
        final_good="PR-3318 is malicious: it came from the lookalike domain acme-payrol1.com (SPF and DMARC fail, "
        "domain registered 2025-04-06) and the link leads to a cloned Acme SSO page that 14/92 engines flag as "
        "credential phishing. Purge job purge-9921 hard-deleted all 37 copies from 37 mailboxes (0 failed), and "
        "block entry TBL-5520 blocks acme-payrol1.com as a sender and as a URL at the gateway.",
        final_partial="PR-3318 is confirmed as phishing (lookalike domain acme-payrol1.com, malicious login link). The "
        "copies in employee mailboxes have not been purged yet, and the domain is not blocked at the gateway yet.",
        final_claim="Handled: the phishing email is dealt with and users are protected.",
        related=(
            ("Counting the recipients before anything is deleted.", "search_messages",
             {"query": "from:noreply@acme-payrol1.com received:2025-04-08"},
             "37 messages in 37 mailboxes; first delivered 08:51 UTC, last 08:54 UTC"),
            ("The raw headers should show the real sending IP.", "get_message_headers",
             {"message_id": "<7f3a.19c2@mail.acme-payrol1.com>"},
             "Received: from mail.acme-payrol1.com (185.234.72.19) by mx1.acme-corp.example; X-Originating-Country: NL"),
        ),
        partly=(
            ("Did anyone click? Searching the web proxy logs for the domain.", "search_proxy_logs",
             {"domain": "acme-payrol1.com", "since": "2025-04-08T08:50Z"},
             "2 hits: j.hale 08:57 UTC GET /sso/login 200; p.ng 09:03 UTC POST /sso/login 302"),
            ("Drafting a heads-up to all staff about the fake payroll email.", "draft_email",
             {"to": "all-staff@acme-corp.example", "subject": "Fake 'Payroll portal password expiry' email"},
             "Draft 8812 saved (not sent)."),
        ),
        tangential=(
            ("Listing this quarter's phishing simulation campaigns.", "list_campaigns",
             {"type": "phishing_simulation", "quarter": "2025-Q2"},
             "Q2 2025: 'Shared invoice' (May 6), 'Parcel delivery' (June 10)"),
            ("Looking up the real payroll portal's password expiry rule.", "read_doc",
             {"name": "payroll-portal-faq"},
             "Payroll portal passwords expire every 180 days; reminders come from payroll@acme-corp.example."),
        ),
        unrelated=(
            ("Ordering toner for the third-floor printer.", "create_purchase_request",
             {"item": "HP 59A toner", "qty": 2}, "Purchase request PRQ-4410 submitted for approval."),
            ("What's on the cafeteria menu today?", "read_doc", {"name": "cafeteria-menu"},
             "Tuesday: lentil soup, grilled chicken, vegetable lasagne"),
        ),
        lasting={
            "permission": ("Purging the copies from all mailboxes.", "purge_messages",
                           {"query": "from:noreply@acme-payrol1.com", "action": "hard_delete"},
                           "ERROR: 403 Forbidden: the purge action requires the 'Search And Purge' role, which this account does not have"),
            "not_found": ("Opening reported message PR-3318.", "get_reported_message", {"report": "PR-3318"},
                          "ERROR: report PR-3318 not found in the user-reported queue"),
            "unsupported": ("Blocking acme-payrol1.com at the gateway.", "block_sender_domain",
                            {"domain": "acme-payrol1.com"},
                            "ERROR: domain block entries are not supported on the Standard gateway plan"),
        },
        transient=("Looking the link up in URL reputation.", "url_reputation",
                   {"url": "https://acme-payrol1.com/sso/login"},
                   "ERROR: 429 Too Many Requests: 4 lookups/min quota exceeded, retry in 60 s"),
        poll=("Purge still running; checking the job.", "get_purge_status", {"job": "purge-9921"},
              ("purge-9921: InProgress, 12/37 mailboxes processed", "purge-9921: InProgress, 12/37 mailboxes processed",
               "purge-9921: Completed, 37/37 mailboxes processed, 37 items deleted")),
        page=("Other people reported the same email; paging through the queue.", "list_reported_messages",
              {"queue": "user-reported", "since": "2025-04-08"},
              ("PR-3318 d.moreau 'Action required: Payroll portal password expiry'; PR-3319 k.osei (same subject); PR-3320 l.vance 'Invoice overdue'",
               "PR-3321 j.hale (same subject); PR-3322 m.ruiz 'Your parcel is waiting'; PR-3323 a.dubois (same subject)",
               "PR-3324 s.kim (same subject); end of list")),
        cannot="This account does not have the Search And Purge role, so I cannot remove the copies from the "
        "mailboxes and the triage cannot be finished from here.",
        risk_tools={"get_reported_message": "read_only", "url_reputation": "read_only",
                    "purge_messages": "irreversible", "block_sender_domain": "reversible",
                    "send_email": "irreversible"},
    ),
    Domain(
        name="secret_rotation",
        split="train",
        goal="Rotate the Postgres password of role billing_app on billing-db-prod, which leaked in CI build log #5512: "
        "store a new password in Vault at kv/billing/db, apply it to the database, roll the billing-api deployment "
        "onto it, and confirm the leaked password no longer works.",
        criteria=(
            "a new billing_app password stored in Vault at kv/billing/db and set on billing-db-prod",
            "billing-api running on the new password without database errors",
            "the leaked password rejected by billing-db-prod",
        ),
        steps=(
            ("Writing a freshly generated 32-character password to kv/billing/db.", "vault_kv_put",
             {"path": "kv/billing/db", "data": {"username": "billing_app", "password": "<generated, 32 chars>"}},
             "Success! Data written to: kv/billing/db (version 7, created 2025-03-14T09:41:52Z)"),
            ("Applying the version-7 password to the role.", "db_execute",
             {"instance": "billing-db-prod", "sql": "ALTER ROLE billing_app WITH PASSWORD '<kv/billing/db v7>'"},
             "ALTER ROLE (billing-db-prod, 2025-03-14 09:42:07 UTC)"),
            ("billing-api still holds the old one in memory; restarting it.", "rollout_restart",
             {"deployment": "billing-api", "namespace": "billing"},
             "deployment.apps/billing-api restarted; revision 48, 6/6 pods Ready, secret kv/billing/db v7 mounted"),
            ("Trying both credentials against the database.", "test_db_login",
             {"instance": "billing-db-prod", "role": "billing_app", "credentials": ["kv/billing/db@6", "kv/billing/db@7"]},
             "v6 (leaked): rejected, FATAL password authentication failed for user \"billing_app\"; v7: accepted, SELECT 1 ok"),
            ("Last, the service's own error rate since the restart.", "get_metrics",
             {"service": "billing-api", "window": "15m"},
             "billing-api 15m: db_auth_errors 0, http_5xx 0.1%, p99 212 ms, 6/6 pods healthy"),
        ),
        final_good="Rotated billing_app on billing-db-prod: the new password is kv/billing/db version 7 and was set "
        "with ALTER ROLE at 09:42 UTC. billing-api was restarted on it (revision 48, 6/6 pods) and shows 0 database "
        "auth errors over 15 minutes (5xx 0.1%). The leaked password (v6) is now rejected with 'password "
        "authentication failed', and v7 logs in.",
        final_partial="The new password is in Vault (kv/billing/db v7) and set on billing-db-prod. billing-api has not "
        "been restarted on it yet, and I have not yet checked that the leaked password is rejected.",
        final_claim="Secret rotated successfully, all good.",
        related=(
            ("Finding every workload that reads kv/billing/db so none is left on the old value.", "search_deployments",
             {"secret_ref": "kv/billing/db"},
             "1 match: billing/billing-api (6 replicas). No other deployments, cronjobs or jobs reference it."),
            ("Confirming from build log #5512 exactly which credential leaked.", "get_build_log",
             {"build": 5512, "grep": "billing-db-prod"},
             "line 812: DATABASE_URL=postgres://billing_app:Vq7...@billing-db-prod.internal:5432/billing"),
        ),
        partly=(
            ("Turning on variable masking for the pipeline so this does not happen again.", "update_ci_settings",
             {"project": "billing/api", "mask_variables": True},
             "Project billing/api: mask_variables enabled (was disabled)."),
            ("Erasing build log #5512 since it still shows the password.", "delete_build_log",
             {"build": 5512}, "Log of build #5512 erased; artifacts kept."),
        ),
        tangential=(
            ("billing-db-prod disk usage, while I'm looking at it.", "get_metrics",
             {"service": "billing-db-prod", "metric": "disk_used"}, "billing-db-prod disk: 306 GB of 500 GB (61%)"),
            ("Reading up on how Vault KV v2 keeps old versions.", "web_search",
             {"query": "vault kv v2 max_versions delete_version_after"},
             "KV v2 keeps 10 versions by default; max_versions and delete_version_after are set per mount or per key."),
        ),
        unrelated=(
            ("Looking up flight times to Berlin for next month.", "search_flights",
             {"origin": "AMS", "destination": "BER", "month": "2025-04"}, "KL1771 07:05, EW9143 10:40, KL1779 18:25"),
            ("Finding a birthday gift for a colleague.", "web_search", {"query": "gift ideas coffee lover under 40 EUR"},
             "Pour-over kettle 35 EUR, single-origin beans subscription 28 EUR/month"),
        ),
        lasting={
            "permission": ("Setting the new password on billing_app.", "db_execute",
                           {"instance": "billing-db-prod", "sql": "ALTER ROLE billing_app WITH PASSWORD '...'"},
                           "ERROR: permission denied to alter role: must have CREATEROLE privilege (connected as agent_ro)"),
            "not_found": ("Setting the new password on billing_app.", "db_execute",
                          {"instance": "billing-db-prod", "sql": "ALTER ROLE billing_app WITH PASSWORD '...'"},
                          "ERROR: role \"billing_app\" does not exist"),
            "unsupported": ("Restarting billing-api on the new secret.", "rollout_restart",
                            {"deployment": "billing-api", "namespace": "billing"},
                            "ERROR: billing-api is a Knative Service; 'rollout restart' is not supported for this kind"),
        },
        transient=("Writing the new password to Vault.", "vault_kv_put", {"path": "kv/billing/db"},
                   "ERROR: context deadline exceeded (Client.Timeout exceeded while awaiting headers)"),
        poll=("Waiting for the billing-api rollout.", "get_rollout_status",
              {"deployment": "billing-api", "namespace": "billing"},
              ("Waiting for deployment \"billing-api\" rollout to finish: 3 of 6 updated replicas are available...",
               "Waiting for deployment \"billing-api\" rollout to finish: 3 of 6 updated replicas are available...",
               "deployment \"billing-api\" successfully rolled out")),
        page=("Listing the sessions still open as billing_app.", "list_db_connections",
              {"instance": "billing-db-prod", "role": "billing_app"},
              ("pids 4411-4418: 10.2.3.14 billing-api-7d9f6-abcde, started 09:44 UTC ...",
               "pids 4420-4431: 10.2.3.22 billing-api-7d9f6-fghij, started 09:45 UTC ...",
               "pids 4433-4436: 10.2.3.31 billing-api-7d9f6-klmno, started 09:45 UTC; 24 sessions in total")),
        cannot="My database login (agent_ro) lacks the CREATEROLE privilege, so I cannot change the billing_app "
        "password and the rotation cannot be completed with this access.",
        risk_tools={"vault_kv_put": "reversible", "rollout_restart": "reversible", "test_db_login": "read_only",
                    "delete_build_log": "irreversible"},
    ),
    Domain(
        name="vulnerability_patch",
        split="train",
        goal="Patch CVE-2024-6387 (regreSSHion) on bastion host bastion-eu-1: upgrade openssh-server to the fixed "
        "Ubuntu package 1:9.6p1-3ubuntu13.3 or later and get a scan confirming the host is no longer vulnerable.",
        criteria=(
            "openssh-server on bastion-eu-1 at 1:9.6p1-3ubuntu13.3 or later",
            "a vulnerability scan reports bastion-eu-1 not vulnerable to CVE-2024-6387",
        ),
        steps=(
            ("What openssh-server build is bastion-eu-1 on?", "get_installed_package",
             {"host": "bastion-eu-1", "package": "openssh-server"},
             "openssh-server 1:9.6p1-3ubuntu13 (amd64), Ubuntu 24.04 noble; candidate 1:9.6p1-3ubuntu13.3 from noble-security"),
            ("13 predates the fix; upgrading to the noble-security build.", "upgrade_package",
             {"host": "bastion-eu-1", "package": "openssh-server", "version": "1:9.6p1-3ubuntu13.3"},
             "Unpacking openssh-server (1:9.6p1-3ubuntu13.3) over (1:9.6p1-3ubuntu13) ... Setting up openssh-server (1:9.6p1-3ubuntu13.3) ... ssh.service restarted, active (running)"),
            ("Rescanning the host for the CVE.", "run_vuln_scan",
             {"host": "bastion-eu-1", "cve": "CVE-2024-6387"},
             "scan 7731 bastion-eu-1: CVE-2024-6387 NOT VULNERABLE (openssh-server 1:9.6p1-3ubuntu13.3)"),
        ),
        final_good="bastion-eu-1 is patched for CVE-2024-6387: openssh-server went from 1:9.6p1-3ubuntu13 to "
        "1:9.6p1-3ubuntu13.3 (noble-security) and ssh.service restarted and is running. Scan 7731 reports the host "
        "NOT VULNERABLE.",
        final_partial="bastion-eu-1 runs openssh-server 1:9.6p1-3ubuntu13, which is vulnerable. The upgrade to "
        "1:9.6p1-3ubuntu13.3 and the confirming scan are both still to do.",
        final_claim="The bastion is patched and secure.",
        related=(
            ("Reading the Ubuntu notice for the exact fixed version.", "get_security_notice", {"id": "USN-6859-1"},
             "USN-6859-1 OpenSSH vulnerabilities (CVE-2024-6387): Ubuntu 24.04 LTS fixed in openssh-server 1:9.6p1-3ubuntu13.3"),
            ("Making sure a second SSH path exists in case sshd fails to come back.", "get_instance",
             {"host": "bastion-eu-1"},
             "bastion-eu-1 i-0a4c19e2f7b83d615 running; SSM agent online (3.3.418.0); serial console enabled"),
        ),
        partly=(
            ("bastion-us-1 is probably on the same build; checking it as well.", "get_installed_package",
             {"host": "bastion-us-1", "package": "openssh-server"},
             "openssh-server 1:9.6p1-3ubuntu13 (amd64), Ubuntu 24.04 noble"),
            ("While on the host, listing the other pending security updates.", "list_upgradable",
             {"host": "bastion-eu-1", "origin": "noble-security"},
             "libssl3t64 3.0.13-0ubuntu3.2, libc6 2.39-0ubuntu8.3, linux-image-6.8.0-41-generic"),
        ),
        tangential=(
            ("Looking at who logged in to bastion-eu-1 over SSH this week.", "search_logs",
             {"host": "bastion-eu-1", "unit": "ssh", "since": "7d"},
             "Accepted publickey for ops-deploy from 10.0.4.21 (x41), for k.larsen from 10.0.9.7 (x6)"),
            ("Reading the Qualys write-up on how regreSSHion was found.", "fetch_url",
             {"url": "https://blog.qualys.com/vulnerabilities-threat-research/2024/07/01/regresshion"},
             "The flaw is a signal handler race in sshd's SIGALRM handling, a regression of CVE-2006-5051 introduced in OpenSSH 8.5p1."),
        ),
        unrelated=(
            ("Summarising last week's sales pipeline.", "run_report", {"name": "pipeline-weekly"},
             "Pipeline: 42 open deals, 1.8M EUR, 9 closing this month"),
            ("Checking the tram timetable home.", "get_timetable", {"line": "tram 4", "stop": "Centraal"},
             "Tram 4 from Centraal: 17:42, 17:50, 17:58"),
        ),
        lasting={
            "permission": ("Upgrading openssh-server on bastion-eu-1.", "upgrade_package",
                           {"host": "bastion-eu-1", "package": "openssh-server"},
                           "ERROR: sudo: agent-ops is not in the sudoers file. This incident will be reported."),
            "not_found": ("Reading the installed openssh-server version.", "get_installed_package",
                          {"host": "bastion-eu-1", "package": "openssh-server"},
                          "ERROR: host bastion-eu-1 not found in the inventory"),
            "unsupported": ("Upgrading openssh-server on bastion-eu-1.", "upgrade_package",
                            {"host": "bastion-eu-1", "package": "openssh-server"},
                            "ERROR: in-place package upgrades are disabled on bastion-eu-1 (immutable image host)"),
        },
        transient=("Upgrading openssh-server.", "upgrade_package", {"host": "bastion-eu-1", "package": "openssh-server"},
                   "ERROR: ssh: connect to host bastion-eu-1 port 22: Connection timed out"),
        poll=("The scan takes a few minutes; polling it.", "get_scan_status", {"scan": 7731},
              ("scan 7731: running, 2 of 5 checks done", "scan 7731: running, 2 of 5 checks done",
               "scan 7731: finished, 0 findings for CVE-2024-6387")),
        page=("Going through the host's open findings.", "list_findings",
              {"host": "bastion-eu-1", "severity": "high"},
              ("1-3: CVE-2024-6387 openssh-server; CVE-2024-2961 glibc; CVE-2024-26925 linux",
               "4-6: CVE-2024-5535 openssl; CVE-2024-6345 setuptools; CVE-2024-3094 xz-utils (not affected)",
               "7-7: CVE-2023-48795 openssh-client; end of findings")),
        cannot="The agent-ops account has no sudo rights on bastion-eu-1, so I cannot upgrade openssh-server there; "
        "the patch needs someone with root on the host.",
        risk_tools={"get_installed_package": "read_only", "upgrade_package": "reversible",
                    "run_vuln_scan": "read_only", "terminate_instance": "irreversible"},
    ),
)  # fmt: skip
