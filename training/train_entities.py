"""Boundary-stress entity values, for the training split only.

The hashed lists in lexicon.py hold mostly short values with few function words, so a
model trained on them learns "a value ends at the first at / on / and / to" or "a value
is one or two words". These values carry exactly what makes a span's edges hard: words
like at / on / for / to / and / with / the / by inside them, two-word names, apostrophes,
digits, and time- or day-like words at the end of free text (a message or a note has no
time argument, so "I'll call you tomorrow" is copied whole).

They are NOT in lexicon.py on purpose: an item added there is hashed into val/test too.
datagen sets L["_stress"] for the training split only; intents.slot_values then swaps
a slot's value for one of these with that probability (default STRESS_SHARE), so the
ordinary distribution stays dominant and validation / test draw exactly as before.
"""
from __future__ import annotations

import random

STRESS_SHARE = 0.25  # per slot draw; ~20-30% keeps the ordinary values dominant


def _split(text: str) -> list[str]:
    return [w.strip() for w in text.strip().split("|") if w.strip()]


# Keyed by the slot name of the request patterns (intents.slot_values).
STRESS: dict[str, list[str]] = {
    "task": _split("""
take the bins out before the weekend|call the bank and cancel the old card|buy stamps at the post office|
send mom the photos from the trip|book a table for two|move the car to the other side of the street|
ask Rowan about the spare keys|get gas on the way home|put the chicken in the oven|drop off the keys with the neighbor|
order a cake for Bram's party|sign up for the 10k|pick up Lou from the station|take the evening pills|
back up the photos on the laptop|bring the chairs in from the garden|return the drill to the hardware store|
check in for the flight|pay the nanny for the week|text the group about the carpool|hang the painting in the hall|
feed the fish and water the ferns|grab coffee beans and oat milk|set out the clothes for the morning|
turn off the sprinklers at the cabin|email the photos to the printer|get 2 tickets for the match|
switch the laundry to the dryer|find the charger for the camera|look at the quote from the roofer
"""),
    "msg": _split("""
I'll call you tomorrow|see you at 7|dinner is at 8 tonight|meet me at the lake on Sunday|
running late, be there by noon|can you grab milk on the way home|I'm at the station and heading home|
ok see you at the game|so sorry about last night|hey did you get my email|the keys are under the mat by the door|
don't wait up for me tonight|we're at table 12 in the back|happy birthday to you and the twins|
I left the car at Rowan's place|call me back when you're free this afternoon|the party moved to Saturday|
bring your swimsuit and a towel|I'm with the kids at the park|lunch with the team went well|
the vet said the dog is fine|can't make it, maybe next week|is the shop on 5th still open|
got the job at the bakery|I'll be home for dinner around 6|tell the kids to do their homework|
leaving work now, back in 20 minutes|the flight lands at 9:40|it's Bram's turn to cook on Friday|
the meeting is in room 4 on the second floor
"""),
    "title": _split("""
drinks with the team|talk on cities and climate|coffee with Jo and Pat|trip to the coast|call about the lease|
meeting with the landlord|pickup from the airport|sunday brunch|friday night trivia|review of the q3 budget|
lunch at the new place|swim at the lake|tour of the new office|party for Mel's 40th|dinner and a movie|
talk by the mayor|game night at Jo's|meet and greet|q&a with the author|wine and cheese night|
bake sale for the school|chess club at the library|happy hour|breakfast with the board|
check-up at the clinic|walk in the park with Bram|demo for the sales team|lunch and learn|
night shift|mom's retirement party
"""),
    "place": _split("""
the house on the hill|Mel's diner|the cafe on 3rd street|the back room at Jo's|room 12 on the second floor|
the park by the river|gate 5 at the stadium|the old fire station|suite 400|the patio at the club|
the church on Ash and 2nd|Bram's apartment|the lobby of the hotel|the field behind the school|building B, floor 3
"""),
    "label": _split("""
pizza in the oven|eggs on the stove|laundry in the dryer|bread for the party|tea and toast|pickup from school|
swim practice at the pool|nap on the couch|the 5k run|meds with breakfast|rice on the hob|bus to work|
call with the studio|the roast for dinner|kids' bath time|stretch and cool down
"""),
    "who": _split("""
Mary Ann|Jo Ellen|Jean-Paul|Dr. Patel|Aunt Lou|Uncle Ray|Coach Reynolds|Ms. O'Brien|Grandpa Joe|Pat from work|
Rowan Ashby|Bram de Wit|Lou at the office|D'Arcy|Nan|Sasha K|Mary-Kate Lyle
"""),
    "city": _split("""
New York|San Francisco|Rio de Janeiro|Salt Lake City|St. Louis|Kuala Lumpur|Buenos Aires|Hong Kong|Las Vegas|
Los Angeles|New Orleans|Santa Fe|Sao Paulo|Ho Chi Minh City|Frankfurt am Main|Stoke-on-Trent|Newcastle upon Tyne|
Baton Rouge|Tel Aviv|Abu Dhabi|Palm Springs|Fort Worth|Saint-Denis|Port of Spain
"""),
    "song": _split("""
Letters From the Coast|Home for the Winter|Two of Us on a Train|Rain and Other Things|Waiting by the Door|
All the Way to Tuesday|See You in the Morning|Midnight at the Diner|Tomorrow and Tomorrow|Somewhere With You|
Born on a Monday|Back to the Start|Ten to Midnight|Me and the Moon|Out of Time Again|Dancing on the Roof|
Don't Call Me Tonight|Run to the Hills of Home|Songs for the Road|Up at Dawn
"""),
    "artist": _split("""
Mara and the Night Owls|The Boys From the Block|Kat & the Kettles|Lou O'Reilly|DJ Rowan|Nine Days to Sunday|
The Band at the End|Jo-Ann Mbeki|Bram de Wit|Ten Years After Dark|Sister Sun and the Strays|Mel & Tomas
"""),
    "playlist": _split("""
songs for the car|music to study to|sunday morning|rainy day at home|run club 5k|chill at the beach|
dinner party with friends|wake up and go|late night drive|90s hits for the gym|songs from the trip|focus and flow
"""),
    "room": _split("""
upstairs hallway|downstairs bathroom|kids' room|spare room|home office|family room|back porch|front hall|
tv room|game room|second bedroom|bedroom 2|mom's room|reading nook|room over the garage
"""),
    "door": _split("""
door to the garage|gate by the road|door at the top of the stairs|back gate to the alley|door of the shed|
kitchen door|dog door|front door of the cabin|door to the basement|gate 2|unit 4B door|side gate by the bins
"""),
    "q": _split("""
restaurants open on sunday|how to get red wine out of a carpet|best pizza near me tonight|
what time does the pharmacy close|how long to boil eggs for|songs with the word rain in them|
how far is the moon from the earth|is the museum open on mondays|things to do with kids this weekend|
rock and roll hall of fame tickets|how to say thanks in a card|bus times from the airport to the center|
what to cook with rice and beans|why do cats sleep so much|trains to the coast tomorrow
"""),
    "note": _split("""
call Jo at 5 tomorrow|the gate code is 2580 then press the bell|ideas for the party: games, cake and music|
dentist on tuesday at 3|pay Rowan back 20 dollars by friday|the wifi at the cabin is cabin2024|
parking on level 2 next to the lift|ask about the lease at the meeting|bring chairs and a table to the park|
Bram's birthday is on the 9th|meeting notes: budget ok, hire two people|buy a gift for Mel before Saturday|
the spare tire is in the trunk under the mat|flight AB 123 leaves at 6:15 am|try the bakery on the corner on sunday
"""),
    "dest": _split("""
the cafe on King Street|Jo's house|the bus stop by the school|platform 9 at the station|the parking lot at the beach|
gate 14 at the airport|the top of the hill|the dog park on 5th street|the hotel by the river|Mel's place|
the church on Ash and 2nd|exit 42|the house at 17 Ash Court|the pier at the end of Bay Road
"""),
    "topic": _split("""
the world cup final|food and drink|science and technology|the race for mayor|jobs and wages|
the housing market in the city|the trade talks|new music this week|rock and roll|the space station|
the storm off the coast|the 2026 season
"""),
    "phrase": _split("""
see you tomorrow|I'll be there at noon|where is the bus to the old town|thank you and good night|
what time does the shop open|can I pay by card|we are two adults and a child|is breakfast included|
I'm looking for the train to the airport|my friend's bag is lost|the room on the third floor|
I'd like to check out on Sunday|how far is it to the beach|the bill for table 4
"""),
}
# Shopping items go through a list, so the items themselves carry the stress:
# "and" inside one item, digits, apostrophes, a trailing day word.
STRESS_ITEMS = _split("""
mac and cheese|salt and vinegar chips|half and half|2 cartons of milk|a dozen eggs|bread from the bakery|
oil for the lawn mower|12 bottles of water|a cake for Saturday|m&m's|kids' yogurt|2% milk|fish for Friday|
sweet and sour sauce|baking soda for the fridge
""")


def stress_values(vals: dict, rng: random.Random, share: float) -> dict:
    """slot_values' draws with each open slot swapped, at `share`, for a stress value.

    A slot's arguments that repeated its surface (title, song...) follow the new value;
    those left open (None / {}) are filled from the surface later, as usual."""
    out = dict(vals)
    for slot, pool in STRESS.items():
        if slot not in out or rng.random() >= share:
            continue
        old, contrib = out[slot]
        new = rng.choice(pool)
        out[slot] = (new, {k: (new if v == old else v) for k, v in contrib.items()})
        if slot == "who":
            out["_who_v"] = (new, {})
    if "items" in out and rng.random() < share:
        _, contrib = out["items"]
        items = list(contrib["items"])  # one stress item per list: "mac and cheese and half
        items[rng.randrange(len(items))] = rng.choice(STRESS_ITEMS)  # and half" is ambiguous even to people
        surface = items[0] if len(items) == 1 else ", ".join(items[:-1]) + rng.choice([" and ", ", and "]) + items[-1]
        out["items"] = (surface, {"items": items})
    return out


# Round 2: values shaped like the validation misses' kinds (never their words). A colon
# inside a note or message ("gift idea: a scarf"), a value that starts with "that", "the"
# or "for", titles of four to six words, and first words whose opening letters the models
# dropped ("gaming", "soccer"), so only the request's structure says where a span starts
# and ends. None ends in a filler ("for me", "when you can"): those always stay outside.
# Appended to the pools above; same share, training only.
STRESS2: dict[str, list[str]] = {
    "note": _split("""
gift idea: a scarf for Jo|wifi password: blue fox 77|film to watch: the long goodbye|
podcast pick: the daily walk|quote of the day: keep it simple|rule one: no phones at dinner|
to fix: the squeaky gate by the shed|idea for later: a blog about bread|for the trip: passports and chargers|
that the boiler needs a service in May|the plumber said the pipe is fine for now|
remember: the car is in bay 12|ask Jo about it again|lunch spot: the noodle bar by the station
"""),
    "msg": _split("""
heads up: the meeting moved to 3|update: we landed safely|news: I got the flat|
that was a great game last night|for me it works, see you then|the kids want pizza again|
question: can you bring the ladder|reminder: your turn to drive|call me when you're free for a minute|
I'm stuck in traffic, start without me
"""),
    "task": _split("""
return the library books to the branch by the park|tell Jo about the change of plans|check the oil again|
renew the parking permit for the street|ask the neighbour to feed the cat on the weekend|
sort out the receipts for the tax return|pay for the school trip|book the car in for a service
"""),
    "title": _split("""
planning session for the spring fair|catch-up with the design team at the office|
drinks after work with the new starters|parents' evening at the primary school|
the annual general meeting|soccer tournament for the under 10s|gaming night at Rowan's|
intro call: new supplier|workshop: writing for the web|volunteer shift at the food bank
"""),
    "label": _split("""
soup on low heat|gaming break|steak on the grill for Bram|phone call with the bank|
cookies: second tray|kids off the tablet
"""),
    "q": _split("""
how to get red wine out of a carpet|best time to visit Lisbon in spring|what is a good first guitar for kids|
how long to boil an egg for a runny yolk|reviews of the new noodle bar by the station|
cheap flights to Rome in May|symptoms of a cold versus the flu|how to say no to a friend politely
"""),
    "topic": _split("""
the vote on the new stadium|prices at the pump|the teachers' strike|the heatwave in the south|
electric scooters in the city
"""),
}
for _slot, _vals in STRESS2.items():
    STRESS[_slot] = STRESS[_slot] + _vals
STRESS_ITEMS = STRESS_ITEMS + _split("""
soccer socks|garlic and herb bread|gaming headset batteries|salt for the dishwasher|2 bags of ice for Friday
""")

# Round 3: values shaped like the remaining validation misses' kinds (never their words).
# Notes and tasks that open with a verb ("measure...", "call...") or end with a day word a
# note keeps ("... tomorrow"), phrases that open with how / what / where (so "convert how
# ..." or "what X is in Y" cannot eat or drop a word), and longer tasks of five to seven
# words. Appended to the pools above; same share, training only.
STRESS3: dict[str, list[str]] = {
    "note": _split("""
sand the shelf before painting it|call the vet about the booster shots|check the tire pressure on Sunday|
order more printer ink|clean the gutters before winter|swap the smoke alarm batteries|
the recycling goes out tomorrow|Jo's flight gets in tonight|parents' evening is on Thursday|
book the dentist for the kids|replace the shower head in the guest bath|label the freezer boxes
"""),
    "task": _split("""
repot the basil and the mint on the balcony|collect the dry cleaning from the shop on the corner|
fill in the school trip form for Lou|renew the passport before the trip in June|
sand and paint the old bookshelf in the hall|tape up the boxes for the move
"""),
    "phrase": _split("""
how is your family|how much is the fare|how old is this building|what is your name|
what time is the last train|where do you live|when does the museum close|
how do I get to the station|what do you recommend
"""),
    "who": _split("""
Auntie May|Coach Dee|Mr. Alvarez
"""),
}
for _slot, _vals in STRESS3.items():
    STRESS[_slot] = STRESS[_slot] + _vals
STRESS_ITEMS = STRESS_ITEMS + _split("""
tins of tomatoes|bin bags|oat milk for Jo|AA batteries
""")

# Round 4 (values in training/train_round4.py): tasks opening with a tool verb, titles and
# queries opening with function words, phrases opening with here / there / do, values
# holding a joining word, and rooms, doors and places with odd edges.
from .train_round4 import STRESS4, STRESS4_ITEMS  # noqa: E402

for _slot, _vals in STRESS4.items():
    STRESS[_slot] = STRESS.get(_slot, []) + _vals
STRESS_ITEMS = STRESS_ITEMS + STRESS4_ITEMS
