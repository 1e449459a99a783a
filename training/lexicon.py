"""Entity lists for the synthetic assistant data, partitioned by split.

Open-class entities (people, places, titles, free text) are cut into disjoint
train / val / test parts so that test accuracy measures copying of *unseen*
values, not recall. Closed-class words (units, languages, weekdays) are shared:
a phone assistant has to know those, not copy them.
"""
from __future__ import annotations

import hashlib

from .out_of_scope import kinds as more_out_of_scope

SPLITS = ("train", "val", "test")


def _words(text: str) -> list[str]:
    return [w.strip() for w in text.strip().split("|") if w.strip()]


def partition(items: list[str], name: str) -> dict[str, list[str]]:
    """Deterministic ~70/15/15 split keyed on the item text (stable across runs and Pythons)."""
    out: dict[str, list[str]] = {s: [] for s in SPLITS}
    for it in items:
        h = int(hashlib.sha1(f"{name}:{it}".encode()).hexdigest()[:8], 16) % 100
        out["train" if h < 70 else "val" if h < 85 else "test"].append(it)
    return out


FIRST_NAMES = _words("""
Anna|Ben|Carlos|Diana|Ethan|Fatima|George|Hannah|Ivan|Julia|Kevin|Laura|Marco|Nina|Oscar|Priya|Quentin|Rosa|Samuel|Tara|
Umar|Vera|William|Ximena|Yusuf|Zoe|Aaron|Bella|Caleb|Daisy|Elias|Freya|Gabriel|Helena|Isaac|Jade|Kai|Leah|Mason|Naomi|
Owen|Paula|Rafael|Sofia|Theo|Uma|Victor|Wendy|Xavier|Yara|Zane|Adrian|Beatrice|Chloe|Dmitri|Elena|Felix|Grace|Hugo|Iris|
Jonas|Kira|Liam|Maya|Nathan|Olivia|Pedro|Ruby|Simon|Tessa|Ulrich|Violet|Wyatt|Yasmin|Abby|Boris|Clara|Dylan|Emma|Finn|
Gemma|Henry|Ingrid|Jack|Kate|Lucas|Mia|Noah|Omar|Penny|Reza|Sara|Tom|Ursula|Vince|Willa|Ahmed|Bianca|Colin|Dara|Eli|
Fiona|Gavin|Hazel|Ian|Jasmine|Kofi|Lena|Miles|Nora|Otto|Pia|Quinn|Rhea|Stefan|Tobias|Una|Valerie|Wes|Aiko|Bruno|Cora|
Dev|Eva|Farah|Gus|Hana|Igor|Joy|Kurt|Lola|Mateo|Nell|Orla|Piet|Rania|Sven|Talia|Ugo|Vlad|Wren|Yuki|Zara|Amir|Brooke|
Cyrus|Delia|Emre|Flora|Greta|Hector|Isla|Jorge|Kemal|Lydia|Marta|Nils|Opal|Ravi|Selma|Tariq|Vivian|Anya|Beau|Celine
""")
RELATIONS = _words("mom|dad|grandma|grandpa|my sister|my brother|my boss|my wife|my husband|my aunt|my uncle|my cousin|"
                   "my roommate|my neighbor|the babysitter|my dentist|my coach|my landlord|my doctor|my partner")
CITIES = _words("""
Paris|London|Tokyo|Berlin|Madrid|Rome|Lisbon|Dublin|Oslo|Vienna|Prague|Warsaw|Athens|Cairo|Nairobi|Lagos|Accra|Dakar|
Mumbai|Delhi|Chennai|Bangkok|Hanoi|Manila|Jakarta|Seoul|Osaka|Beijing|Shanghai|Sydney|Melbourne|Auckland|Toronto|
Montreal|Vancouver|Chicago|Boston|Denver|Seattle|Austin|Miami|Atlanta|Phoenix|Dallas|Houston|Portland|Nashville|Detroit|
Lima|Bogota|Quito|Santiago|Havana|Caracas|Helsinki|Stockholm|Copenhagen|Brussels|Amsterdam|Zurich|Geneva|Munich|Hamburg|
Milan|Naples|Venice|Seville|Valencia|Porto|Krakow|Budapest|Bucharest|Sofia|Belgrade|Zagreb|Istanbul|Ankara|Tehran|Doha|
Dubai|Riyadh|Karachi|Lahore|Dhaka|Kathmandu|Colombo|Singapore|Perth|Brisbane|Wellington|Calgary|Ottawa|Quebec|Halifax|
Anchorage|Honolulu|Tucson|Omaha|Tulsa|Memphis|Orlando|Tampa|Raleigh|Richmond|Pittsburgh|Cleveland|Buffalo|Albany|
Edinburgh|Glasgow|Cardiff|Belfast|Leeds|Bristol|Marseille|Lyon|Nice|Bordeaux|Cologne|Dresden|Leipzig|Salzburg|Bergen|
Tallinn|Riga|Vilnius|Kyiv|Minsk|Tbilisi|Yerevan|Baku|Almaty|Tashkent|Kabul|Casablanca|Tunis|Algiers|Addis Ababa|
Kampala|Kigali|Lusaka|Harare|Durban|Cape Town|Luanda|Montevideo|Asuncion|La Paz|Cusco|Cancun|Monterrey|Guadalajara
""")
ROOMS = _words("kitchen|living room|bedroom|office|garage|hallway|bathroom|basement|nursery|den|porch|attic|"
               "dining room|study|guest room|patio|laundry room|kids room|master bedroom|front yard|back yard|"
               "entryway|sunroom|playroom|closet|workshop|balcony|loft|pantry|stairs")
DOORS = _words("front door|back door|garage door|side door|patio door|basement door|gate|shed door|"
               "porch door|cellar door|main entrance|garden gate|office door|storage room door")
ADJECTIVES = _words("""
silver|golden|broken|quiet|electric|midnight|wild|velvet|paper|crystal|hollow|burning|frozen|gentle|lonely|neon|
secret|distant|scarlet|blue|wandering|restless|bright|faded|sleepy|hidden|savage|sweet|bitter|endless|shallow|ancient|
purple|rusty|summer|winter|autumn|spring|little|heavy|crimson|emerald|fragile|lucky|hungry|golden hour|northern|southern|
painted|sunny|stormy|dusty|copper|cosmic|lazy|sacred|static|tender|violet|wooden
""")
NOUNS = _words("""
river|lantern|mountain|heart|city|ocean|highway|garden|window|mirror|shadow|dream|fire|rain|storm|echo|road|sky|moon|
star|island|forest|desert|bridge|harbor|letter|train|wolf|tiger|sparrow|engine|radio|diamond|canyon|valley|meadow|
thunder|lullaby|carousel|compass|feather|horizon|orchard|parade|satellite|tide|tunnel|volcano|whisper|anthem|
balloon|cathedral|daydream|ember|fountain|glacier|kingdom|marble|nightingale|prairie|rocket|signal|skyline
""")
SURNAMES = _words("""
Stone|Rivers|Lane|Hart|Cole|Fox|Gray|Knight|Moss|Reed|Shaw|Wolfe|Vance|Blake|Cruz|Dunn|Ellis|Frost|Hale|Jensen|Kato|
Lopez|Marsh|Novak|Ortiz|Park|Quinn|Rossi|Santos|Tran|Ueda|Voss|West|Young|Zhou|Abbott|Bishop|Carter|Doyle|Everett|Finch|
Garner|Holloway|Ibsen|Jordan|Keller|Lindqvist|Mercer|Nakamura|Okafor|Petrov|Ramos|Sterling|Thorne|Underwood|Valdez|Whitaker
""")
BAND_NOUNS = _words("owls|lanterns|pilots|ghosts|foxes|strangers|comets|wolves|echoes|sailors|rebels|dreamers|"
                    "machines|giants|kings|sparrows|tigers|shadows|rockets|mirrors|satellites|poets|bandits|monks")
REMINDER_TASKS = _words("""
call the dentist|pick up the kids|take out the trash|water the plants|pay the electric bill|buy a birthday card|
submit the report|book a haircut|renew my passport|feed the cat|walk the dog|check the oven|move the car|return the library books|
take my medicine|charge my laptop|pick up dry cleaning|email the landlord|schedule a vet visit|defrost the chicken|
back up my phone|stretch|drink some water|start the laundry|call grandma|buy milk|send the invoice|print the tickets|
pack my gym bag|cancel the subscription|order more coffee|check the mail|clean the fridge|pay rent|update my resume|
prepare the slides|pick up the package|call the plumber|wish Sam happy birthday|lock the windows|refill the prescription|
review the contract|bring an umbrella|collect the photos|wash the car|clean the gutters|replace the air filter|
fill up the gas tank|change the bedsheets|buy flowers|pick up the cake|practice piano|study for the exam|meditate|
read chapter five|water the garden|tidy the garage|book the flights|confirm the reservation|return the rental car|
sign the permission slip|pay the phone bill|make a doctor appointment|clear the dishwasher|sort the recycling|
send the thank you notes|stop by the bank|call the insurance company|get the car serviced|check the tire pressure
""")
MESSAGES = _words("""
I will be late|running ten minutes behind|dinner is ready|can you pick up some bread|I am on my way|see you at six|
the meeting moved to Friday|call me when you can|happy birthday|I left my keys at home|do you want to grab lunch|
the package arrived|good luck today|I miss you|traffic is terrible|we are out of milk|the game starts at eight|
don't forget the tickets|I just landed|thanks for everything|let's meet at the cafe|I'm stuck in a meeting|
the kids are asleep|the car is fixed|I'll call you tonight|congratulations on the new job|are we still on for tonight|
I got the tickets|please feed the cat|the door code is changed|bring a jacket|I'm at the front entrance|
save me a seat|the train is delayed|can we reschedule|I found your wallet|lunch is on me|the report is done|
I'm outside|text me when you get home|the concert was amazing|see you tomorrow morning|I need a ride|
the doctor said everything is fine|I picked up the groceries|let me know when you land|the wifi password is on the fridge|
I'll bring dessert|happy anniversary|the dog got out|meet me at the station|I'm heading home now|
we won the match|the movie starts at nine|remember your passport|I booked the table|the plumber is coming at noon
""")
EVENT_TITLES = _words("""
team meeting|dentist appointment|yoga class|project review|parent teacher conference|haircut|dinner with friends|
book club|coffee chat|job interview|soccer practice|doctor visit|budget review|piano lesson|birthday party|
sprint planning|lunch meeting|car service|date night|quarterly review|vet appointment|study group|client call|
family dinner|gym session|design review|board meeting|wedding rehearsal|guitar lesson|volunteer shift|
flight to the conference|movie night|open house|team offsite|standup|tax appointment|swim practice|art class|
product demo|one on one|brunch|spanish class|hiking trip|recital|networking event|code review|farmers market
""")
EVENT_PLACES = _words("the office|room 204|the community center|city hall|the library|main street cafe|the gym|"
                      "the school|conference room B|the park|the town hall|the studio|the clinic|the stadium|"
                      "the hotel lobby|the bakery|the museum|the bookstore|the church hall|the rec center|"
                      "the boardroom|the dojo|the pool|the garage|the lab|the theater")
SEARCH_QUERIES = _words("""
best hiking trails nearby|how to fix a leaky faucet|symptoms of the flu|cheap flights to Lisbon|how tall is Mount Everest|
banana bread recipe|who won the world cup in 2018|how to tie a tie|vegan lasagna recipe|when does daylight saving end|
how many calories in an apple|best sci fi novels|how to remove a wine stain|history of the eiffel tower|
tips for better sleep|how to change a tire|local farmers markets|how to make cold brew coffee|the population of Canada|
easy stretches for back pain|how to clean a cast iron pan|what is a black hole|best budget laptops|
how to grow tomatoes|meaning of the word serendipity|how to train a puppy|quick dinner ideas|
the distance to the moon|how to write a cover letter|beginner guitar chords|how to unclog a drain|
the tallest building in the world|how do vaccines work|easy card games for kids|how to boil an egg|
when was the printing press invented|best time to visit Japan|how to make sourdough starter|the speed of light|
how to meditate|homemade pizza dough|how to save money on groceries|why is the sky blue|
how to jump start a car|what causes thunder|how to fold a fitted sheet|best board games for two|
how long to steam broccoli|what is the capital of Australia|how to get rid of fruit flies|learn python basics
""")
NOTE_CONTENTS = _words("""
buy a new phone charger|ideas for the garden: tulips and roses|the wifi password is sunflower42|
parking spot is level 3 row F|gift ideas for mom: scarf, book, candle|call the bank about the card|
the meeting notes are in the shared folder|locker combination 12 34 56|try the new thai place on 5th street|
dentist recommended a softer toothbrush|book recommendation: the midnight library|water the ferns every friday|
the plumber quoted 200 dollars|pack sunscreen for the trip|the car needs an oil change at 60000 miles|
recipe idea: lemon garlic pasta|passport expires next june|measure the window for curtains|
movie list: inception, arrival, up|remember to thank Jonas for the help|project deadline is the 14th|
the spare key is under the blue pot|kids' shoe sizes are 11 and 13|hotel confirmation number 58213|
start running three times a week|the paint color is called harbor gray|ask the doctor about allergies|
podcast to try: the daily|the door code is 4471|birthday party theme: dinosaurs|
learn ten spanish words a day|the printer ink is model 62|split the bill with Ravi|the bike lock code is 902
""")
SHOP_ITEMS = _words("""
milk|eggs|bread|butter|cheese|apples|bananas|rice|pasta|coffee|tea|sugar|flour|olive oil|tomatoes|onions|garlic|
potatoes|carrots|spinach|chicken|salmon|yogurt|cereal|orange juice|paper towels|toilet paper|dish soap|shampoo|
toothpaste|batteries|trash bags|honey|peanut butter|jam|lettuce|cucumbers|avocados|lemons|limes|beans|lentils|
oatmeal|granola|almonds|chocolate|ice cream|frozen peas|tortillas|salsa|chips|crackers|ketchup|mustard|mayonnaise|
vinegar|salt|pepper|cinnamon|basil|ginger|mushrooms|bell peppers|broccoli|cauliflower|zucchini|grapes|strawberries|
blueberries|pears|peaches|watermelon|sparkling water|soda|diapers|cat food|dog food|laundry detergent|sponges|
aluminum foil|napkins|coffee filters|bagels|muffins|cream|sour cream|tofu|ground beef|bacon|sausages|shrimp|tuna
""")
NEWS_TOPICS = _words("technology|sports|politics|science|business|health|the economy|football|basketball|climate|"
                     "space exploration|the stock market|local news|movies|music|travel|education|world news|"
                     "artificial intelligence|electric cars|the elections|tennis|cricket|fashion|food|gaming|"
                     "real estate|medicine|energy|the olympics|baseball|hockey|art|books|weather disasters")
TRANSLATE_PHRASES = _words("""
where is the train station|good morning|thank you very much|how much does this cost|I would like a coffee|
where is the bathroom|nice to meet you|can you help me|I am lost|what time is it|the check please|
I don't understand|do you speak English|I am allergic to peanuts|see you later|have a nice day|
how are you|my name is Anna|I need a doctor|one ticket please|is this seat taken|good night|
where can I buy a ticket|the food was delicious|I love this city|call the police|happy new year|
excuse me|how do I get to the airport|I have a reservation|a table for two please|it is very hot today|
open the window please|where is the museum|I am a vegetarian|turn left at the corner
""")
LANGUAGES = _words("Spanish|French|German|Italian|Portuguese|Japanese|Chinese|Korean|Arabic|Hindi|Russian|Dutch|"
                   "Swedish|Greek|Turkish|Polish|Vietnamese|Thai|Indonesian|Hebrew")
PLACES = _words("""
the airport|the nearest gas station|the train station|the hospital|the closest pharmacy|the mall|the beach|
the zoo|the stadium|the university|the bus terminal|downtown|the harbor|the post office|the nearest coffee shop|
the city library|the farmers market|the art museum|the botanical garden|the ferry terminal|the ski resort|
the convention center|the national park|the aquarium|the hardware store|the bowling alley|the ice rink
""")
STREETS = _words("Maple|Oak|Pine|Cedar|Elm|Birch|Willow|Main|Park|Lake|Hill|River|Sunset|Highland|Chestnut|Walnut|"
                 "Spruce|Magnolia|Harbor|Mill|Church|School|Spring|Forest|Meadow|Ridge|Valley|Bay|Cherry|Dogwood")
# The first 41 out-of-scope kinds, cut by content hash (train 33, val 2, test 6). Frozen:
# datagen draws as many indices as these gave each split, and new kinds go to out_of_scope.py.
OUT_OF_SCOPE = _words("""
order a large pepperoni pizza|book me a flight to {city}|transfer 200 dollars to {name}|take a selfie|
call me an uber to {city}|buy two tickets for the concert|post this photo on instagram|pay my credit card bill|
scan this document|check my heart rate|order new running shoes|book a hotel room in {city}|
rent a car for the weekend|make me a sandwich|vacuum the living room|wash the dishes|
start the car engine|record a video|book a table at an italian restaurant|track my package|
order groceries for delivery|feed my fish|open the garage with my face|do my taxes|
write a 10 page essay for me|reserve a tennis court|buy bitcoin|sell my old bike online|
cancel my gym membership|hail a taxi|print this page|iron my shirt|fly the drone|
check my bank balance|renew my car insurance|order flowers for {name}|mow the lawn|
schedule a package pickup|download a movie|change my profile picture|brew some coffee
""")
SMALLTALK_NAMES = _words("Alex|Sam|Jordan|Robin|Casey|Riley|Morgan|Jamie|Taylor|Avery|Drew|Harper|Logan|Parker|Reese")


def split_lists() -> dict[str, dict[str, list[str]]]:
    """All open-class lists, partitioned; keys are list names."""
    lists = {
        "first_names": FIRST_NAMES, "relations": RELATIONS, "cities": CITIES, "rooms": ROOMS,
        "doors": DOORS, "adjectives": ADJECTIVES, "nouns": NOUNS, "surnames": SURNAMES,
        "band_nouns": BAND_NOUNS, "reminders": REMINDER_TASKS, "messages": MESSAGES,
        "event_titles": EVENT_TITLES, "event_places": EVENT_PLACES, "queries": SEARCH_QUERIES,
        "notes": NOTE_CONTENTS, "items": SHOP_ITEMS, "news": NEWS_TOPICS,
        "phrases": TRANSLATE_PHRASES, "places": PLACES, "streets": STREETS,
        "out_of_scope": OUT_OF_SCOPE, "smalltalk_names": SMALLTALK_NAMES,
    }
    parts = {name: partition(items, name) for name, items in lists.items()}
    out: dict[str, dict[str, list[str]]] = {s: {} for s in SPLITS}
    for name, p in parts.items():
        for s in SPLITS:
            # every split needs at least a few values; tiny lists fall back to the train part
            out[s][name] = p[s] if len(p[s]) >= 2 else p["train"]
    for s, extra in more_out_of_scope().items():  # dealt by theme, at least 20 kinds per split
        out[s]["out_of_scope"] = out[s]["out_of_scope"] + extra
    return out


def legacy_oos_draws() -> dict[str, int]:
    """How many out-of-scope kinds each split drew from before the list grew (see datagen)."""
    parts = partition(OUT_OF_SCOPE, "out_of_scope")
    return {s: len(parts[s] if len(parts[s]) >= 2 else parts["train"]) for s in SPLITS}
