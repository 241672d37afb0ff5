"""The integrity markers in languages other than English: the core phrases of the English families (override the
earlier instructions, new instructions, a new persona, send the credentials, reveal your system prompt, keep it
from the user) written from their meaning in the top web languages (es, fr, de, pt, it, zh, ja, ru, ko) and in
four that filter-dodging payloads use (zu, sq, ga, gd). Each phrase fires the English family's feature: no new
feature, no new weight.

The patterns are written in plain lower-case text and read the text as ``stopwise.normalise`` leaves it: accents
removed (``precedentes``, ``ubermittle``), Cyrillic letters that look Latin mapped (``fold_script`` gives a
Russian pattern that form). What a caller may rely on: ``search(norm, present)`` finds, per family, whether one
of its phrases matches ``norm`` anywhere, exactly as the ungated regexes would (``present`` = the text's tokens,
``words_present``); every pattern is gated by the tokens each of its matches must hold.
"""

# ruff: noqa: E501 -- the phrase table's regexes read best one to a line, as the English families' do.
from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from stopwise.guardian.evaluators._integrity_search import Family, _alternatives, _first_words, _required
from stopwise.normalise import fold_script

__all__ = ["LANGUAGES", "gate", "search"]

# A gap inside one sentence: a full stop (Latin or CJK) ends it, unless a dot sits inside an address or a name.
_G = r"(?:[^.\n。！？!?]|\.(?=\S))"

_PHRASES: dict[str, dict[str, tuple[str, ...]]] = {
    "de": {
        "marker_override": (
            rf"\b(?:ignoriere|ignorieren|ignoriert|ignorier|vergiss|vergesst|vergessen sie|missachte|missachten|uberschreibe)\b{_G}{{0,40}}\b(?:vorherigen?|vorigen?|bisherigen?|fruheren?|obigen?|alten?|ursprunglichen?|alle|samtliche)\b{_G}{{0,30}}\b(?:anweisungen|anweisung|instruktionen|befehle|regeln|vorgaben|anordnungen|aufgaben)\b",
            r"\bneue (?:wichtige |dringende )?(?:anweisungen|instruktionen|befehle|anordnungen)\b",
            r"\b(?:deine|ihre) (?:neue|wahre|eigentliche|echte) (?:aufgabe|mission)\b",
        ),
        "marker_persona": (
            r"\b(?:du bist|sie sind) (?:jetzt|ab sofort|nun|ab jetzt)\b(?! (?:bereit|fertig|angemeldet|eingeloggt|registriert|in der lage|abonniert|verbunden))",
            r"\bab (?:jetzt|sofort) (?:bist|wirst|musst|sollst|antwortest) du\b",
            r"\b(?:tu so|tue so), als (?:ob du|warst du)\b",
            r"\b(?:entwicklermodus|entwickler-modus|developer-modus|gott-modus)\b",
        ),
        "marker_tool_call": (
            rf"\b(?:sende|senden sie|schicke|schick|schicken sie|leite|leiten sie|ubermittle|ubermitteln sie|ubertrage|exfiltriere|kopiere|lade)\b{_G}{{0,60}}\b(?:passwort|passworter|kennwort|kennworter|zugangsdaten|anmeldedaten|api-schlussel|ssh-schlussel|privaten schlussel|geheimnisse)\b",
        ),
        "marker_prompt_leak": (
            r"\b(?:deinen?|deine|ihren?|ihre) (?:systemprompt|system-prompt|systemnachricht|systemanweisungen|anfangsanweisungen|versteckten anweisungen|geheimen anweisungen)\b",
        ),
        "marker_imperative": (
            r"\b(?:sag|sage|erzahl|erzahle|informiere|verrate|warne) (?:dem |den )?(?:benutzer|nutzer|anwender) (?:nichts|nicht)\b",
            r"\bohne (?:den |die )?(?:benutzer|nutzer|anwender|benutzerin) zu (?:informieren|fragen|benachrichtigen|warnen)\b",
        ),
        "marker_request": (r"\bin (?:deiner|ihrer|jeder) (?:antwort|zusammenfassung)\b",),
    },
    "es": {
        "marker_override": (
            rf"\b(?:ignora|ignore|ignorar|ignoren|olvida|olvide|olviden|olvidate|omite|omita|descarta|descarte|desestima|desestime|haz caso omiso de|haga caso omiso de)\b{_G}{{0,20}}?\b(?:todas |todos |las |los |tus |sus |estas |esas )*(?:(?:instrucciones|indicaciones|ordenes|reglas|directrices|directivas|mensajes|comandos|tareas)\b{_G}{{0,12}}\b(?:anteriores|previas|previos|originales|precedentes|de arriba|del sistema|iniciales|antiguas)\b|(?:anteriores|previas|previos|antiguas) (?:instrucciones|indicaciones|ordenes|reglas|directrices))",
            r"\b(?:ignora|ignore|olvida|olvide|olvidate de) todo lo (?:anterior|que te (?:dijeron|han dicho|dije))\b",
            r"\bnuevas (?:e importantes |importantes |urgentes )?(?:instrucciones|ordenes|directrices|directivas)\b",
            r"\b(?:tu|su) (?:nueva|verdadera|autentica) (?:tarea|mision)\b",
        ),
        "marker_persona": (
            r"\bahora eres\b",
            r"\ba partir de ahora,? (?:eres|seras|actuaras|responderas|debes|tu)\b",
            r"\bfinge (?:que eres|ser)\b",
            r"\bmodo (?:desarrollador|dios|dan|sin restricciones)\b",
        ),
        "marker_tool_call": (
            rf"\b(?:envia|envie|enviar|envien|manda|mande|reenvia|reenvie|transfiere|transfiera|comparte|comparta|sube|suba|copia|copie|filtra)\b{_G}{{0,60}}\b(?:contrasenas?|credenciales|claves? (?:de api|api|ssh|privadas?|secretas?)|tokens? de acceso|secretos)\b",
        ),
        "marker_prompt_leak": (
            r"\b(?:tu|su|tus|sus) (?:prompt|mensaje|instrucciones) (?:del sistema|de sistema|inicial(?:es)?|ocult[oa]s?|secret[oa]s?|originales)\b",
        ),
        "marker_imperative": (
            r"\bno (?:le |se lo )?(?:digas|diga|menciones|mencione|informes|informe|avises|avise|cuentes|cuente)\b[^.\n]{0,12}\bal usuario\b",
            r"\bsin (?:informar|avisar|decir|notificar|preguntar)(?:le)? al usuario\b",
        ),
        "marker_request": (r"\ben (?:tu|su|cada) (?:respuesta|resumen)\b",),
    },
    "pt": {
        "marker_override": (
            rf"\b(?:ignore|ignora|ignorar|ignorem|esqueca|esquece|esquecer|esquecam|desconsidere|desconsidera|desconsiderar|descarte|descarta)\b{_G}{{0,20}}?\b(?:todas |todos |as |os |suas |tuas |estas |essas )*(?:(?:instrucoes|orientacoes|ordens|regras|diretrizes|diretivas|comandos|mensagens|tarefas)\b{_G}{{0,12}}\b(?:anteriores|previas|originais|acima|iniciais|antigas|do sistema)\b|(?:antigas|previas) (?:instrucoes|orientacoes|ordens|regras|diretrizes))",
            r"\b(?:ignore|esqueca|desconsidere) tudo (?:o que (?:foi dito|te disseram)|acima|antes)\b",
            r"\bnovas (?:e importantes |importantes |urgentes )?(?:instrucoes|ordens|diretrizes|diretivas)\b",
            r"\b(?:sua|tua) (?:nova|verdadeira|real) (?:tarefa|missao)\b",
        ),
        "marker_persona": (
            r"\bagora (?:voce e|tu es)\b",
            r"\ba partir de agora,? (?:voce|tu)\b",
            r"\bfinja (?:que (?:voce )?e|ser)\b",
            r"\bmodo (?:desenvolvedor|deus|dan|sem restricoes)\b",
        ),
        "marker_tool_call": (
            rf"\b(?:envie|envia|enviar|mande|manda|encaminhe|encaminha|transfira|compartilhe|copie|carregue|vaze)\b{_G}{{0,60}}\b(?:senhas?|credenciais|chaves? (?:de api|api|ssh|privadas?|secretas?)|tokens? de acesso|segredos)\b",
        ),
        "marker_prompt_leak": (
            r"\b(?:seu|teu|suas|tuas) (?:prompt|mensagem|instrucoes) (?:do sistema|de sistema|inicia(?:l|is)|ocult[oa]s?|secret[oa]s?|originais)\b",
        ),
        "marker_imperative": (
            r"\bnao (?:conte|diga|mencione|informe|avise)\b[^.\n]{0,12}\bao usuario\b",
            r"\bsem (?:informar|avisar|notificar|perguntar)(?: ao| o)? usuario\b",
        ),
        "marker_request": (r"\bna (?:sua|tua|cada) resposta\b", r"\bno (?:seu|teu) resumo\b"),
    },
    "it": {
        "marker_override": (
            rf"\b(?:ignora|ignore|ignori|ignorare|ignorate|dimentica|dimentichi|dimenticate|trascura|tralascia|scarta|non considerare)\b{_G}{{0,20}}?\b(?:tutte |tutti |le |gli |i |tue |sue |queste )*(?:(?:istruzioni|indicazioni|ordini|regole|direttive|comandi|messaggi|compiti)\b{_G}{{0,12}}\b(?:precedenti|anteriori|originali|sopra|iniziali|vecchie|del sistema|di sistema)\b|(?:precedenti|vecchie) (?:istruzioni|indicazioni|regole|direttive))",
            r"\b(?:ignora|ignore|dimentica) tutto (?:quello che|cio che|quanto) (?:ti e stato detto|detto prima|sopra)\b",
            r"\bnuove (?:e importanti |importanti |urgenti )?(?:istruzioni|direttive|ordini)\b",
            r"\b(?:il tuo|il suo) (?:nuovo|vero) (?:compito|obiettivo)\b",
        ),
        "marker_persona": (
            r"\b(?:ora|adesso) sei\b(?! (?:pronto|pronta|in grado|registrat|connesso|connessa|iscritt|abbonat))",
            r"\bda ora in poi,? (?:sei|sarai|devi|risponderai|agirai|tu)\b",
            r"\bfingi di essere\b",
            r"\bmodalita (?:sviluppatore|dio|dan|senza restrizioni)\b",
        ),
        "marker_tool_call": (
            rf"\b(?:invia|inviare|manda|mandare|inoltra|inoltrare|trasferisci|condividi|copia|carica)\b{_G}{{0,60}}\b(?:password|credenziali|chiavi? (?:api|ssh|private?|segrete?)|token di accesso|segreti)\b",
        ),
        "marker_prompt_leak": (
            r"\b(?:il tuo|il suo|le tue|le sue) (?:prompt|messaggio|istruzioni) (?:di sistema|del sistema|inizial[ei]|nascost[oe]|segret[oe]|original[ei])\b",
        ),
        "marker_imperative": (
            r"\bnon (?:dire|dirlo|informare|avvisare|menzionare)\b[^.\n]{0,12}\ball'utente\b",
            r"\bsenza (?:informare|avvisare|dire|chiedere)(?: all'| l')?utente\b",
        ),
        "marker_request": (r"\bnella (?:tua|sua) risposta\b", r"\bnel (?:tuo|suo) riassunto\b"),
    },
    "fr": {
        "marker_override": (
            rf"\b(?:ignore|ignorez|ignorer|oublie|oubliez|oublier|ne tiens pas compte|ne tenez pas compte|fais abstraction|faites abstraction|neglige|negligez|ecarte|ecartez)\b{_G}{{0,20}}?\b(?:toutes |tous |les |tes |vos |ces |des )*(?:(?:instructions|consignes|directives|ordres|regles|indications|commandes|messages|taches)\b{_G}{{0,12}}\b(?:precedentes|anterieures|ci-dessus|originales|initiales|anciennes|du systeme|plus haut)\b|(?:precedentes|anciennes) (?:instructions|consignes|directives|regles))",
            r"\b(?:ignore|ignorez|oublie|oubliez) tout ce qui (?:precede|a ete dit)\b",
            r"\bnouvelles (?:instructions|consignes|directives|ordres)\b(?! (?:du processeur|cpu|simd|machine))",
            r"\b(?:ta|votre) (?:nouvelle|vraie|veritable) (?:tache|mission)\b",
        ),
        "marker_persona": (
            r"\b(?:tu es|vous etes) (?:maintenant|desormais|a present)\b(?! (?:pret|prete|connecte|inscrit|abonne|en mesure|capable))",
            r"\ba partir de maintenant,? (?:tu|vous)\b",
            r"\b(?:fais|faites) semblant d'etre\b",
            r"\bmode (?:developpeur|dieu|dan|sans restrictions)\b",
        ),
        "marker_tool_call": (
            rf"\b(?:envoie|envoyez|envoyer|transfere|transferez|transmets|transmettez|partage|partagez|copie|copiez|publie|televerse)\b{_G}{{0,60}}\b(?:mots? de passe|identifiants|cles? (?:api|d'api|ssh|privees?|secretes?)|jetons? d'acces|secrets)\b",
        ),
        "marker_prompt_leak": (
            r"\b(?:ton|votre|tes|vos) (?:prompt|message|instructions|consignes) (?:systeme|du systeme|initia(?:l|les)|cache(?:es)?|secret(?:es)?|originales)\b",
        ),
        "marker_imperative": (
            r"\bne (?:dis|dites|mentionne|mentionnez|signale|signalez|revele|revelez) (?:rien|pas|jamais)\b[^.\n]{0,15}\ba l'utilisateur\b",
            r"\bsans (?:en )?(?:informer|avertir|prevenir) l'utilisateur\b",
        ),
        "marker_request": (r"\bdans (?:ta|votre|chaque) reponse\b", r"\bdans (?:ton|votre) resume\b"),
    },
    "zh": {
        "marker_override": (
            r"(?:忽略|无视|無視|忽视|忽視|忘记|忘記|忘掉|不要理会|不要理會|跳过|跳過|不要遵守|不再遵守)[^。\n]{0,6}(?:之前|以前|先前|上面|上述|此前|原来|原來|原始|所有|全部|一切|前面)[^。\n]{0,10}(?:指令|指示|规则|規則|提示|要求|命令|设定|設定|说明|說明)",
            r"(?:你的|您的)(?:新任务|新任務|真正的任务|真正的任務|真正任务)",
        ),
        "marker_persona": (
            r"(?:你现在是|你現在是|从现在开始[,，]?你|從現在開始[,，]?你|从现在起[,，]?你|假装你是|假裝你是|开发者模式|開發者模式)",
        ),
        "marker_tool_call": (
            r"(?:发送|發送|发给|發給|转发|轉發|上传|上傳|泄露|洩露|复制|複製)[^。\n]{0,25}(?:密码|密碼|凭证|憑證|凭据|憑據|密钥|金鑰|私钥|私鑰)",
            r"(?:把|将|將)[^。\n]{0,20}(?:密码|密碼|凭证|憑證|凭据|憑據|密钥|金鑰|私钥|私鑰)[^。\n]{0,15}(?:发送|發送|发给|發給|发到|發到|转发|轉發|上传|上傳)",
        ),
        "marker_prompt_leak": (
            r"(?:你的|您的)(?:系统提示|系統提示|系统指令|系統指令|系统消息|系統訊息|初始指令|隐藏指令|隱藏指令)",
        ),
        "marker_imperative": (r"(?:不要|别|別|不得)(?:告诉|告訴|通知|提醒)(?:用户|用戶|使用者)",),
        "marker_request": (r"在(?:你的|您的)(?:回答|回复|回覆|答复|摘要)(?:中|里|裡|末尾|结尾|結尾|开头|開頭)",),
    },
    "ja": {
        "marker_override": (
            r"(?:以前|前|上記|これまで|今まで|元|最初|先|全て|すべて)の[^。\n]{0,8}(?:指示|命令|指令|ルール|プロンプト|設定)[^。\n]{0,8}(?:無視|忘れ)",
            r"新しい(?:重要な)?(?:指示|命令)",
        ),
        "marker_persona": (r"(?:あなたは今から|今からあなたは|これからあなたは|開発者モード)",),
        "marker_tool_call": (
            r"(?:パスワード|認証情報|資格情報|apiキー|秘密鍵)[^。\n]{0,20}(?:送信|送って|送れ|転送|漏ら)",
        ),
        "marker_prompt_leak": (r"システムプロンプト[^。\n]{0,6}(?:表示|教え|出力|見せ|繰り返|明か)",),
        "marker_imperative": (r"ユーザーに(?:は)?(?:言わ|伝え|知らせ|教え)ないで",),
        "marker_request": (r"(?:回答|返答|応答|返信)(?:の(?:最後|最初|末尾|冒頭))?に[^。\n]{0,20}(?:含め|追加|書い|出力)",),
    },
    "ko": {
        "marker_override": (
            rf"(?:이전|앞|위|기존|원래|모든){_G}{{0,6}}(?:지시|지침|명령|규칙|프롬프트){_G}{{0,10}}(?:무시|잊어|잊으)",
            r"새로운 (?:지시|지침|명령)",
        ),
        "marker_persona": (r"(?:너는|당신은) 이제", r"(?:이제부터|지금부터) (?:너는|당신은)", r"개발자 모드"),
        "marker_tool_call": (rf"(?:비밀번호|암호|자격 증명|api 키|비밀 키|개인 키){_G}{{0,40}}(?:보내|전송|전달|업로드|유출)",),
        "marker_prompt_leak": (
            r"(?:너의|당신의|네) 시스템 프롬프트",
            rf"시스템 프롬프트(?:를|을){_G}{{0,10}}(?:보여|출력|알려|공개|반복)",
        ),
        "marker_imperative": (r"사용자에게 (?:알리지|말하지|전하지) ?(?:마|말)",),
        "marker_request": (r"(?:답변|응답|대답|답장)에 [^.\n]{0,20}(?:포함|추가|넣어|써)",),
    },
    "ru": {
        "marker_override": (
            rf"(?:игнорируй|игнорируйте|проигнорируй|проигнорируйте|забудь|забудьте|не обращай внимания на|не обращайте внимания на){_G}{{0,30}}(?:предыдущие|прежние|все|вышеуказанные|вышеприведенные|исходные|системные|старые){_G}{{0,20}}(?:инструкции|указания|правила|команды|распоряжения|сообщения|задания)",
            r"(?:новые (?:важные |срочные )?(?:инструкции|указания|распоряжения))",
        ),
        "marker_persona": (r"(?:ты теперь|теперь ты|с этого момента,? ты|отныне,? ты|притворись|режим разработчика)",),
        "marker_tool_call": (
            rf"(?:отправь|отправьте|перешли|перешлите|пришли|пришлите|передай|передайте|скопируй|скопируйте){_G}{{0,60}}(?:пароль|пароли|учетные данные|api-ключ|ключ api|ключи api|секретный ключ|закрытый ключ|ssh-ключ)",
        ),
        "marker_prompt_leak": (r"(?:свой|твой|ваш|свои|твои|ваши) (?:системный промпт|системный промт|системное сообщение|системные инструкции|скрытые инструкции)",),
        "marker_imperative": (
            r"(?:не говори|не сообщай|не рассказывай) (?:об этом )?пользователю",
            r"без ведома пользователя",
        ),
        "marker_request": (r"в (?:своем|твоем|вашем|каждом) (?:ответе|резюме)",),
    },
    "zu": {
        "marker_override": (
            rf"\b(?:ziba|ungazinaki|ungayinaki|zinganaki|khohlwa|khohlwani)\b{_G}{{0,40}}\b(?:imiyalelo|umyalelo|imithetho|iziyalezo|izinkombandlela)\b",
            r"\b(?:imiyalelo|iziyalezo) (?:emisha|emsha)\b",
        ),
        "marker_tool_call": (
            rf"\b(?:thumela|thumelani|dlulisela)\b{_G}{{0,60}}\b(?:iphasiwedi|amaphasiwedi|iphasiwede|okhiye be-api|ukhiye we-api|imininingwane yokungena)\b",
        ),
        "marker_prompt_leak": (r"\b(?:umyalelo|imiyalelo|umyalezo) (?:wesistimu|yesistimu|wesistimu)\b",),
        "marker_request": (r"\b(?:empendulweni|kwimpendulo|kwempendulo) yakho\b",),
    },
    "sq": {
        "marker_override": (
            rf"\b(?:injoro|injoroni|harro|harroni|shperfill|shperfillni|mos merr parasysh|mos merrni parasysh)\b{_G}{{0,40}}\b(?:udhezimet|udhezime|udhezimi|urdhrat|urdherat|rregullat|instruksionet|komandat)\b",
            r"\b(?:udhezime|udhezimet) (?:e |te )?(?:reja|ri)\b",
        ),
        "marker_persona": (r"\btani ti je\b", r"\bnga tani e tutje,? ti\b"),
        "marker_tool_call": (
            rf"\b(?:dergo|dergoni|dergojeni|percill|percillni)\b{_G}{{0,60}}\b(?:fjalekalimin|fjalekalimet|fjalekalim|kredencialet|celesin api|celesat api|celesin privat)\b",
        ),
        "marker_prompt_leak": (r"\b(?:promptin|prompti|mesazhin|udhezimet) e sistemit\b",),
        "marker_request": (r"\bne pergjigjen (?:tende|tuaj)\b",),
    },
    "ga": {
        "marker_override": (
            rf"\b(?:dean neamhaird|na tabhair aird|dean dearmad|scaoil thart)\b{_G}{{0,40}}\b(?:treoracha|treoir|orduithe|rialacha|teagasc)\b",
            r"\btreoracha nua\b",
        ),
        "marker_persona": (r"\bta tu anois\b", r"\bo seo amach,? (?:ta tu|beidh tu)\b"),
        "marker_tool_call": (
            rf"\b(?:seol|cuir)\b{_G}{{0,60}}\b(?:pasfhocal|pasfhocail|focal faire|dintiuir|eochair api|eochracha api)\b",
        ),
        "marker_prompt_leak": (r"\b(?:leid|treoracha|teachtaireacht) an chorais\b",),
        "marker_request": (r"\bi do (?:fhreagra|fhreagairt|achoimre)\b",),
    },
    "gd": {
        "marker_override": (
            rf"\b(?:leig seachad|na toir an aire do|diochuimhnich|na toir feart air)\b{_G}{{0,40}}\b(?:stiuiridhean|stiuireadh|orduighean|riaghailtean|oideasan)\b",
            r"\b(?:stiuiridhean|stiuireadh|orduighean|oideasan) ura\b",
        ),
        "marker_persona": (r"\btha thu a-nis\b", r"\bbho seo a-mach,? (?:tha thu|bidh thu|bi)\b"),
        "marker_tool_call": (rf"\bcuir\b{_G}{{0,60}}\b(?:facal-faire|facal faire|faclan-faire|teisteanasan|iuchair api)\b",),
        "marker_prompt_leak": (r"\b(?:brosnachadh|stiuireadh|stiuiridhean|teachdaireachd) an t-siostaim\b",),
        "marker_request": (r"\bnad fhreagairt\b",),
    },
}  # fmt: skip

LANGUAGES: tuple[str, ...] = tuple(_PHRASES)
"""The languages with marker phrases (ISO 639-1 codes)."""


@dataclass(frozen=True, slots=True)
class _Phrase:
    """One pattern as the normalised text reads it, and the tokens one of which each of its matches holds."""

    rx: re.Pattern[str]
    gate: frozenset[str]
    clauses: tuple[frozenset[str], ...]
    """Sets of words later in the pattern of which each match holds one each (``_required``)."""
    families: list[Family] = field(default_factory=list, compare=False, repr=False)
    """``split``'s result, made on first use: most phrases of most processes never run, and splitting all of them
    would add tens of milliseconds to the rule evaluator's first use."""

    def split(self) -> Family:
        """``rx`` as literal-led pieces (``_integrity_search``): most phrases start with ``\\b`` and an alternation of
        words, which ``re`` would try at every character of the text; the pieces jump between their words."""
        if not self.families:
            # Split from the pattern with its case-split letters as classes: a piece's gate words are then only
            # the letters every match holds as written.
            self.families.append(Family.of([self.rx.pattern], self.gate))
        return self.families[0]


# Upper-case Cyrillic letters the look-alike table maps to Latin while their lower-case forms stay ("Теперь" reads
# "teпepь", "теперь" reads "тeпepь"): a phrase's letter matches either, and none of them gates it.
_CASE_SPLIT = {"т": "[тt]", "н": "[нh]", "м": "[мm]"}
_CASE_TABLE = {ord(letter): either for letter, either in _CASE_SPLIT.items()}


def _gate(source: str) -> frozenset[str]:
    """Tokens one of which every match of ``source`` holds: the words its leading alternatives start with, or the
    first character past ASCII of each (a character past ASCII is always a token of its own)."""
    bare = source[2:] if source.startswith("\\b") else source
    words = _first_words(bare)
    if words is not None:
        return words
    if bare.startswith("(?:"):
        depth, end = 0, 0
        for i, c in enumerate(bare):
            depth += c == "(" and bare[i - 1 : i] != "\\"
            depth -= c == ")" and bare[i - 1 : i] != "\\"
            if not depth:
                end = i
                break
        leads = _alternatives(bare[3:end])
    else:
        leads = [bare]
    out = set()
    for lead in leads:
        char = next((c for c in lead if not c.isascii() and c not in _CASE_SPLIT), None)
        # Only a literal start is read: a lead that begins with syntax cannot be gated this way.
        if char is None or any(c in "()[]{}?*+|\\." for c in lead[: lead.index(char)]):
            raise ValueError(f"no gate for the marker phrase {source!r}")
        out.add(char)
    return frozenset(out)


@functools.cache
def _phrases() -> Mapping[str, tuple[_Phrase, ...]]:
    """Per family, its phrases in every language, folded as the normaliser folds text and compiled (on first use)."""
    out: dict[str, list[_Phrase]] = {}
    for language, families in _PHRASES.items():
        for family, sources in families.items():
            for source in sources:
                folded = fold_script(source)
                rx = re.compile(folded.translate(_CASE_TABLE))
                # A Russian phrase's letters may read as Latin ones (``_CASE_SPLIT``): its words are not known.
                sets = [_gate(folded), *(() if language == "ru" else _required(folded, True))]
                # The set of the longest words gates first: "in deiner antwort" is looked for by "antwort".
                first = max(sets, key=lambda words: min(map(len, words)))
                clauses = tuple(c for c in sets if c is not first)
                out.setdefault(family, []).append(_Phrase(rx, first, clauses))
    return {family: tuple(phrases) for family, phrases in out.items()}


@functools.cache
def gate() -> frozenset[str]:
    """The tokens that gate a phrase: a text holding none of them matches no phrase."""
    return frozenset(w for phrases in _phrases().values() for p in phrases for w in p.gate)


@functools.cache
def _by_word() -> Mapping[str, tuple[tuple[int, str, _Phrase], ...]]:
    """Gate word -> the phrases it gates, each with its place in ``_phrases``' order and its family."""
    out: dict[str, list[tuple[int, str, _Phrase]]] = {}
    order = 0
    for family, phrases in _phrases().items():
        for phrase in phrases:
            for word in phrase.gate:
                out.setdefault(word, []).append((order, family, phrase))
            order += 1
    return {word: tuple(entries) for word, entries in out.items()}


def search(norm: str, present: set[str] | None, skip: Iterable[str] = ()) -> dict[str, tuple[int, int]]:
    """Per family not in ``skip``, the span of the leftmost-starting match of its phrases in ``norm`` (a normalised
    text whose tokens are ``present``; None: every phrase is searched, the reference the gates must match). Of
    matches starting at one place, the phrase first in the table wins."""
    if present is None:
        candidates = [(family, p) for family, phrases in _phrases().items() for p in phrases]
    else:
        # Only the phrases one of whose gate words the text holds, then their other sets (one C call each).
        index = _by_word()
        gated = {entry[0]: entry for word in present & gate() for entry in index[word]}
        candidates = [
            (family, p)
            for _, family, p in sorted(gated.values(), key=lambda e: e[0])
            if not any(map(present.isdisjoint, p.clauses))
        ]
    found: dict[str, tuple[int, int]] = {}
    skipped = set(skip)
    for family, phrase in candidates:
        if family in skipped:
            continue
        if present is None:
            m = phrase.rx.search(norm)
            span = None if m is None else m.span()
        else:
            span = phrase.split().search(norm, present)
        if span is not None and (family not in found or span[0] < found[family][0]):
            found[family] = span
    return found
