"""Out-of-scope requests: things a phone/home assistant with the tools of tools.py cannot do.

The first 41 kinds (lexicon.OUT_OF_SCOPE) are cut by content hash, which left validation
2 kinds and test 6, so the oos figure swung with how a model treats two sentences. The
kinds here are grouped by theme and dealt explicitly: each theme gives its training kinds
to train, one kind to validation and one to test, so every split sees every theme and the
held-out splits get 26 new kinds each.

Rules for new kinds, so that the label "refuse" stays true and the splits stay clean:
* nothing a tool can serve, even loosely: no questions a web search could answer, no
  timers, alarms, reminders, messages, calls, calendar entries, lights, thermostat,
  volume, do not disturb, door locks, notes, directions, unit conversions, news,
  translations, music or shopping-list edits (buying something is not a list edit);
* no near misses that a tool covers in part (cancelling an alarm, skipping a song);
* validation and test kinds are imperative: they start with no word of
  datagen.QUESTION_WORDS and end without punctuation, so `style` draws exactly what it
  drew for the first 41 kinds and the published splits keep every other conversation;
* {city} and {name} slots are filled from the split's own entity lists.
"""
from __future__ import annotations

# (theme, training kinds, validation kind, test kind); training kinds are "|"-separated.
THEMES: list[tuple[str, str, str, str]] = [
    ("payments",
     "pay the electricity bill from my checking account|venmo {name} 40 dollars for dinner|"
     "how much money is in my savings account|split the restaurant bill with {name} on the payment app|"
     "set up autopay for my internet bill",
     "wire this month's rent to my landlord", "move 500 dollars into my savings account"),
    ("online shopping",
     "buy a new phone case on amazon|order a replacement charger online|return the shoes I ordered last week|"
     "use my gift card to buy an ebook|cancel my last online order",
     "purchase a pair of wireless earbuds", "buy a new vacuum cleaner online"),
    ("food delivery",
     "order sushi for delivery|have thai food delivered to my house|reorder my usual from the burger place|"
     "get me a burrito from the taqueria down the street|can you get us some fried chicken delivered",
     "order a chicken curry from the indian place", "get two large pizzas delivered to the office"),
    ("travel bookings",
     "book a train ticket to {city}|check me in for my flight|upgrade my seat to business class|"
     "cancel my hotel reservation|book an apartment in {city} for next weekend",
     "reserve two seats on the bus to {city}", "buy a ferry ticket to {city}"),
    ("ride hailing",
     "get me a lyft to the airport|cancel my uber|how far away is my driver|tip my uber driver five dollars|"
     "order a taxi big enough for six people",
     "order a taxi for me and {name}", "book a cab home from the party"),
    ("chores",
     "fold the laundry|clean the bathroom|cook dinner for us tonight|make the bed|dust the bookshelves",
     "scrub the kitchen floor", "sweep the front steps"),
    ("appliances",
     "preheat the oven to 200 degrees|start the dishwasher|run the washing machine on the delicate cycle|"
     "boil the kettle|make me some toast",
     "start the rice cooker", "run the dryer again"),
    ("camera and photos",
     "take a picture of this receipt|switch to the front camera|edit this photo to remove the red eye|"
     "make a collage from my vacation photos|delete the blurry pictures from today",
     "zoom in with the camera", "crop this photo into a square"),
    ("social media",
     "tweet that I'm at the beach|like {name}'s latest post|update my status on facebook|"
     "share this article on linkedin|upload my vacation pictures to instagram",
     "follow {name} on twitter", "go live on my youtube channel"),
    ("email and accounts",
     "unsubscribe me from this newsletter|empty my spam folder|change my email password|"
     "archive all the emails from last week|log me out of my netflix account",
     "reset my apple id password", "delete my old facebook account"),
    ("health devices",
     "how many steps have I walked today|start a run workout on my watch|measure my blood oxygen|"
     "sync my fitness tracker|update my weight in the health app",
     "check my blood sugar level", "take my blood pressure reading"),
    ("car",
     "warm up the car before I leave|how much gas is left in the car|honk the horn so I can find my car|"
     "open the sunroof|turn on the seat heaters in the car",
     "roll down the car windows", "defrost the car windshield"),
    ("files",
     "zip these files and email them to {name}|rename this file to budget final|"
     "move my downloads into a new folder|open the pdf my boss sent me|free up storage on my phone",
     "delete the old files in my downloads", "unzip the folder {name} sent me"),
    ("printing",
     "print my boarding pass|print two copies of the contract|fax this form to the insurance company|"
     "scan the receipts into a pdf|make a photocopy of my passport",
     "print the recipe in color", "print out my resume"),
    ("apps and phone settings",
     "install spotify on my phone|update all my apps|uninstall the game I downloaded yesterday|"
     "change my wallpaper to a beach picture|connect my headphones over bluetooth",
     "download the new banking app", "restart my phone"),
    ("documents",
     "fix the spelling in my essay|write my cover letter for me|add a table of contents to my report|"
     "make the title of my document bold|summarize the pdf I just downloaded",
     "proofread my thesis chapter", "format my resume into two columns"),
    ("tv and games",
     "rent the new superhero movie|cast my screen to the tv|download the next episode of my show|"
     "beat this level of the game for me|record the game on the dvr",
     "subscribe me to disney plus", "cancel my netflix subscription"),
    ("home services",
     "book a plumber for the leaky sink|hire a cleaner for the weekend|get someone to fix the broken dishwasher|"
     "order a new water filter for the fridge|hire a babysitter for tonight",
     "arrange for someone to repair the roof", "hire movers for the weekend"),
    ("pets and garden",
     "walk the dog for me|trim the hedges|give the cat her medicine|refill the bird feeder|clean the litter box",
     "brush the dog's teeth", "plant the tomato seedlings"),
    ("smart devices without a tool",
     "close the curtains|start the robot mower|run the sprinklers|heat up the hot tub|"
     "empty the robot vacuum bin",
     "start the pool pump", "fill the bathtub"),
    ("work apps",
     "join my zoom call|share my screen|clock me in at work|submit my timesheet|approve the expense report",
     "upload the slides to the team drive", "share the budget spreadsheet with {name}"),
    ("government and admin",
     "renew my driver's license|apply for a parking permit|pay my parking ticket|register my new car|"
     "apply for a passport for my son",
     "vote in the local election for me", "fill out my visa application"),
    ("investing",
     "buy 10 shares of apple stock|sell my ethereum|place a bet on the game tonight|"
     "how is my stock portfolio doing|invest 100 dollars in an index fund",
     "put 50 dollars into my retirement account", "sell half of my stocks"),
    ("physical favors",
     "give me a haircut|massage my shoulders|tie my shoelaces|hand me the remote|pour me a glass of water",
     "fetch my slippers", "bring me a blanket"),
    ("phone hardware",
     "take a screenshot|rotate the screen|factory reset my tablet|check the battery health of my phone|"
     "charge my phone faster",
     "record my screen", "format the memory card"),
    ("parcels and post",
     "ship this package to {name}|print a return label for my order|change my delivery address|"
     "buy stamps online|redirect my mail to my new address",
     "mail a birthday card to {name}", "arrange a courier to collect my parcel"),
]


# Round 2, training only: more kinds in the themes whose validation kinds were most often
# served with a tool call (ride hailing taken as make_call, social media as play_music or
# make_call, chores and pets as make_call / web_search, uploads and subscriptions as
# directions or notes). New wordings; none rewords a validation or test kind.
TRAIN_ROUND2 = [
    "book me a ride to {city}", "get an uber for {name} to the airport", "order a car to take me to {city}",
    "send a driver to pick me up", "get me a rideshare to the stadium",
    "add {name} as a friend on facebook", "unfollow {name} on tiktok", "block {name} on instagram",
    "repost {name}'s story", "send {name} a friend request", "post a photo of my lunch online",
    "mop the hallway", "iron my shirts for tomorrow", "clean the windows upstairs", "take out the recycling",
    "fold the towels", "feed the goldfish", "groom the cat", "give the dog a bath", "take the puppy outside",
    "upload my photos to the cloud", "attach the contract to the support ticket", "back up my laptop to the drive",
    "sign me up for hulu", "renew my gym membership", "upgrade my streaming plan", "start a free trial of a video app",
    "get me a plane ticket to {city}", "find a hostel in {city} for two nights", "rent a car in {city}",
    "snap a panorama of the view", "turn on the camera flash", "shoot a slow motion video",
]


def kinds() -> dict[str, list[str]]:
    """The new kinds per split: every theme's training kinds (and TRAIN_ROUND2), one validation
    and one test kind."""
    out: dict[str, list[str]] = {"train": [], "val": [], "test": []}
    for _, train, val, test in THEMES:
        out["train"] += [k.strip() for k in train.split("|")]
        out["val"].append(val)
        out["test"].append(test)
    out["train"] += TRAIN_ROUND2
    return out
