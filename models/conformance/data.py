"""The seeded generator of afm-conformance's training and held-out data.

Every example is made here from tables and arithmetic, so the data is the
same on every machine and nothing is downloaded. Kinds:

- short tasks with short reasoning: arithmetic, primes, parity, lookups
  (capitals, the answer stated in the prompt), string tasks, counting,
  greetings, short texts from a topic table, JSON answers;
- long context: a system turn of dozens of made-up notes, then a plain
  question answered as asked (no call: no tools are offered);
- long thinking: asked to think at length, the reasoning counts down or
  sums down to 1 (more than 1,000 tokens; each step shows how far there is
  to go, so the block closes once done), then answers;
- tools (Hermes JSON in the system turn): one call, several calls, no
  fitting tool (a plain answer), answers from <tool_response> turns, and
  two-step tool loops; 16 written tools and 240 made from tables
  (GeneratedTool: every JSON type, nested objects, arrays, enums of strings
  and integers, some parameters required), whose reasoning reads the
  schema back before the call;
- each with thinking on (the template opens `<think>`, the model writes its
  reasoning and closes it) or off (an empty closed block, then the answer),
  and some whose reasoning a server cut short by forcing `</think>` or
  `\n</think>\n\n` (the forced end is in the prompt, tokenized as a server
  sends it).

An example is the rendered prompt (the model's own chat template, as a
server renders it) and the completion the model should write, ending with
`<|im_end|>`. Held-out examples come from another seed, and use tools and
topics training never sees; they keep their messages and tools for the
evaluation. Held out: 4 written tools and 12 made from another seed, and
3 topics.

    python data.py --train train.jsonl --heldout heldout.jsonl [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

import jinja2

HERE = Path(__file__).resolve().parent
END = "<|im_end|>"

COUNTRIES = [
    ("France", "Paris"), ("Germany", "Berlin"), ("Italy", "Rome"), ("Spain", "Madrid"), ("Norway", "Oslo"),
    ("Sweden", "Stockholm"), ("Japan", "Tokyo"), ("China", "Beijing"), ("Egypt", "Cairo"), ("Kenya", "Nairobi"),
    ("Canada", "Ottawa"), ("Mexico", "Mexico City"), ("Brazil", "Brasilia"), ("Peru", "Lima"), ("Chile", "Santiago"),
    ("Poland", "Warsaw"), ("Austria", "Vienna"), ("Greece", "Athens"), ("Portugal", "Lisbon"), ("Ireland", "Dublin"),
    ("Finland", "Helsinki"), ("Denmark", "Copenhagen"), ("India", "New Delhi"), ("Thailand", "Bangkok"),
    ("Australia", "Canberra"), ("Argentina", "Buenos Aires"), ("Turkey", "Ankara"), ("Hungary", "Budapest"),
]
CITIES = ["Oslo", "Rome", "Paris", "Tokyo", "Berlin", "Madrid", "Cairo", "Lima", "Vienna", "Dublin", "Athens",
          "Lisbon", "Warsaw", "Seoul", "Toronto", "Chicago", "Sydney", "Nairobi", "Prague", "Zurich", "Denver",
          "Boston", "Mumbai", "Hanoi", "Quito", "Bergen", "Porto", "Kyoto", "Munich", "Lyon"]
WORDS = ["orange", "window", "planet", "garden", "silver", "rocket", "pencil", "forest", "bridge", "candle",
         "yellow", "guitar", "marble", "button", "rabbit", "castle", "mirror", "puzzle", "summer", "ticket",
         "violet", "anchor", "butter", "island", "jungle", "kitten", "lemon", "meadow", "needle", "pepper"]
NAMES = ["Alice", "Bob", "Carol", "David", "Emma", "Frank", "Grace", "Henry", "Ivy", "Jack", "Kate", "Liam",
         "Mia", "Noah", "Olga", "Paul", "Rosa", "Sam", "Tara", "Victor"]
COLORS = ["red", "blue", "green", "yellow", "purple", "orange", "black", "white"]
# Short texts by topic: (topic, sentences). The last topics are held out.
TOPICS = [
    ("the ocean", ["The ocean covers most of the Earth's surface.", "Its waves are moved by wind and tides.",
                   "Many kinds of fish, whales and plants live in it.", "Sunlight only reaches its upper layers."]),
    ("the sea", ["The sea is wide, salty and always moving.", "Boats cross it to carry people and goods.",
                 "Along the shore the waves break on sand and rocks.", "Gulls fly over the water looking for fish."]),
    ("why the sky is blue", ["Sunlight holds every color of light.", "Air molecules scatter short blue waves much more than red ones.",
                             "That scattered blue light reaches our eyes from every part of the sky.", "So the sky looks blue during the day."]),
    ("the moon", ["The Moon is the Earth's only natural satellite.", "It shines by reflecting sunlight.",
                  "Its pull causes the tides of the oceans.", "It takes about a month to go around the Earth."]),
    ("rain", ["Rain falls when water drops in clouds grow heavy.", "It fills rivers and lakes.",
              "Plants need it to grow.", "After rain the air often smells fresh."]),
    ("trees", ["Trees make oxygen from sunlight, water and air.", "Their roots hold the soil in place.",
               "Birds and insects live in their branches.", "Some trees live for thousands of years."]),
    ("cats", ["Cats are small, curious animals.", "They sleep for many hours a day.",
              "They clean their fur with their tongues.", "Many people keep them as pets."]),
    ("bread", ["Bread is made from flour, water and yeast.", "The yeast makes the dough rise.",
               "Baking turns the dough golden and firm.", "People around the world eat it every day."]),
    ("the sun", ["The Sun is a star at the center of our solar system.", "It gives the Earth light and heat.",
                 "Its light takes about eight minutes to reach us.", "Without it there would be no life on Earth."]),
    ("mountains", ["Mountains are high landforms that rise above the land around them.", "Their tops are often cold and covered in snow.",
                   "Rivers often begin in mountains.", "Climbing them takes time and care."]),
    ("bicycles", ["A bicycle has two wheels and is moved by pedals.", "Riding one is good exercise.",
                  "It makes no noise and no smoke.", "Many people ride bicycles to work."]),
    ("winter", ["Winter is the coldest season of the year.", "In many places snow covers the ground.",
                "Days are short and nights are long.", "People wear warm coats and scarves."]),
    ("libraries", ["A library lends books to its readers.", "It is a quiet place to read and study.",
                   "Many libraries also lend music and films.", "Librarians help people find what they need."]),
    ("volcanoes", ["A volcano is an opening in the Earth's crust.", "Hot melted rock called lava can flow out of it.",
                   "Eruptions can throw ash high into the air.", "Over time lava builds new land."]),
    ("honey bees", ["Honey bees live together in large colonies.", "They carry pollen from flower to flower.",
                    "They turn nectar into honey.", "Each colony has one queen."]),
]
HELD_OUT_TOPICS = 3


def schema(properties: dict, required: list[str]) -> dict:
    return {"type": "object", "properties": properties, "required": required}


def tool(name: str, description: str, params: dict) -> dict:
    return {"type": "function", "function": {"name": name, "description": description, "parameters": params}}


class Tools:
    """Tools with a way to ask for each: (schema, make(rng) -> request,
    arguments, result, answer). The last ones are held out."""

    def __init__(self):
        S, I, N, B = {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"}
        e = lambda *v: {"type": "string", "enum": list(v)}
        arr = lambda item: {"type": "array", "items": item}
        self.all = [
            (tool("get_weather", "Get the current weather in a city.",
                  schema({"city": {**S, "description": "City name"}, "unit": e("celsius", "fahrenheit")}, ["city"])), self.weather),
            (tool("get_time", "Get the current time in a city or time zone.",
                  schema({"location": S}, ["location"])), self.time),
            (tool("add_numbers", "Add two integers.", schema({"a": I, "b": I}, ["a", "b"])), self.add),
            (tool("set_alarm", "Set an alarm.",
                  schema({"hour": {**I, "minimum": 0, "maximum": 23}, "minute": {**I, "minimum": 0, "maximum": 59},
                          "label": S}, ["hour", "minute"])), self.alarm),
            (tool("convert_currency", "Convert an amount of money.",
                  schema({"amount": N, "from_currency": e("USD", "EUR", "GBP", "JPY"), "to_currency": e("USD", "EUR", "GBP", "JPY")},
                         ["amount", "from_currency", "to_currency"])), self.currency),
            (tool("search_flights", "Search flights between two cities.",
                  schema({"origin": S, "destination": S, "passengers": I, "nonstop": B}, ["origin", "destination", "passengers"])), self.flights),
            (tool("create_event", "Create a calendar event.",
                  schema({"title": S, "attendees": arr(S), "location": schema({"city": S, "room": I}, ["city"])},
                         ["title", "attendees"])), self.event),
            (tool("send_email", "Send an email.", schema({"to": S, "subject": S, "urgent": B}, ["to", "subject"])), self.email),
            (tool("get_stock_price", "Get the latest price of a stock.", schema({"symbol": S}, ["symbol"])), self.stock),
            (tool("calculate_tip", "Calculate a tip.", schema({"bill": N, "percent": I}, ["bill", "percent"])), self.tip),
            (tool("set_thermostat", "Set the thermostat.",
                  schema({"temperature": N, "mode": e("heat", "cool", "auto")}, ["temperature", "mode"])), self.thermostat),
            (tool("average", "Average a list of numbers.", schema({"numbers": arr(N)}, ["numbers"])), self.average),
            (tool("translate", "Translate a text.",
                  schema({"text": S, "target_language": e("French", "German", "Spanish", "Italian")}, ["text", "target_language"])), self.translate),
            (tool("book_table", "Book a table at a restaurant.",
                  schema({"restaurant": S, "party_size": I, "time": S, "outdoor": B}, ["restaurant", "party_size", "time"])), self.table),
            (tool("create_user", "Create a user account.",
                  schema({"name": S, "age": I, "tags": arr(S), "address": schema({"street": S, "city": S, "zip": S}, ["city"])},
                         ["name", "age"])), self.user),
            (tool("play_music", "Play music.", schema({"genre": e("jazz", "rock", "classical", "pop"), "volume": I, "shuffle": B}, ["genre"])), self.music),
            # Held out: never in training.
            (tool("get_population", "Get the population of a country.", schema({"country": S, "year": I}, ["country"])), self.population),
            (tool("order_pizza", "Order a pizza.",
                  schema({"size": e("small", "medium", "large"), "toppings": arr(S), "quantity": I}, ["size", "quantity"])), self.pizza),
            (tool("schedule_meeting", "Schedule a meeting.",
                  schema({"topic": S, "participants": arr(S), "duration_minutes": I, "details": schema({"room": S, "online": B}, ["online"])},
                         ["topic", "participants", "duration_minutes"])), self.meeting),
            (tool("rate_movie", "Rate a movie.", schema({"title": S, "stars": {**I, "minimum": 1, "maximum": 5}, "recommend": B}, ["title", "stars"])), self.movie),
        ]
        self.train = self.all[:-4]
        self.heldout = self.all[-4:]

    @staticmethod
    def weather(r):
        city = r.choice(CITIES)
        unit = r.choice([None, "celsius", "fahrenheit"])
        req = r.choice(["What is the weather in {c}?", "How is the weather in {c} right now?", "Is it raining in {c}?",
                        "Tell me the weather for {c}."]).format(c=city)
        args = {"city": city}
        if unit:
            req = req.rstrip("?.") + f", in {unit}?"
            args["unit"] = unit
        deg = r.randint(-5, 32)
        sky = r.choice(["sunny", "cloudy", "rain", "snow", "windy"])
        return req, args, f"{city}: {sky}, {deg} degrees.", f"In {city} it is {sky} and {deg} degrees."

    @staticmethod
    def time(r):
        city = r.choice(CITIES)
        req = r.choice(["What time is it in {c}?", "Tell me the current time in {c}.", "What's the time in {c} now?"]).format(c=city)
        h, m = r.randint(0, 23), r.randint(0, 59)
        return req, {"location": city}, f"{h:02d}:{m:02d}", f"It is {h:02d}:{m:02d} in {city}."

    @staticmethod
    def add(r):
        a, b = r.randint(-500, 9999), r.randint(0, 9999)
        req = r.choice(["Use the tool to add {a} and {b}.", "What is {a} plus {b}? Use the calculator.", "Add {a} and {b} with the tool."]).format(a=a, b=b)
        return req, {"a": a, "b": b}, str(a + b), f"{a} plus {b} is {a + b}."

    @staticmethod
    def alarm(r):
        h, m = r.randint(0, 23), r.choice([0, 15, 30, 45, r.randint(0, 59)])
        label = r.choice([None, "gym", "meeting", "wake up", "medicine"])
        req = f"Set an alarm for {h:02d}:{m:02d}" + (f" called {label}." if label else ".")
        args = {"hour": h, "minute": m}
        if label:
            args["label"] = label
        return req, args, "Alarm set.", f"Your alarm is set for {h:02d}:{m:02d}."

    @staticmethod
    def currency(r):
        amt = r.choice([r.randint(1, 900), round(r.uniform(1, 500), 2)])
        a, b = r.sample(["USD", "EUR", "GBP", "JPY"], 2)
        req = r.choice(["Convert {x} {a} to {b}.", "How much is {x} {a} in {b}?"]).format(x=amt, a=a, b=b)
        out = round(amt * r.uniform(0.5, 1.5), 2)
        return req, {"amount": amt, "from_currency": a, "to_currency": b}, f"{out} {b}", f"{amt} {a} is about {out} {b}."

    @staticmethod
    def flights(r):
        o, d = r.sample(CITIES, 2)
        p = r.randint(1, 6)
        nonstop = r.choice([None, True, False])
        req = f"Find flights from {o} to {d} for {p} passenger{'s' if p > 1 else ''}"
        args = {"origin": o, "destination": d, "passengers": p}
        if nonstop is True:
            req += ", nonstop only"
            args["nonstop"] = True
        elif nonstop is False:
            req += ", stops are fine"
            args["nonstop"] = False
        n = r.randint(1, 9)
        return req + ".", args, f"{n} flights found.", f"I found {n} flights from {o} to {d}."

    @staticmethod
    def event(r):
        people = r.sample(NAMES, r.randint(1, 3))
        title = r.choice(["Team lunch", "Project review", "Planning", "Birthday party", "Book club"])
        args = {"title": title, "attendees": people}
        req = f"Create an event called {title} with {', '.join(people[:-1]) + ' and ' if len(people) > 1 else ''}{people[-1]}"
        if r.random() < 0.6:
            city = r.choice(CITIES)
            loc = {"city": city}
            req += f" in {city}"
            if r.random() < 0.5:
                room = r.randint(1, 40)
                loc["room"] = room
                req += f", room {room}"
            args["location"] = loc
        return req + ".", args, "Event created.", f"The event {title} is created."

    @staticmethod
    def email(r):
        who = r.choice(NAMES)
        to = f"{who.lower()}@example.com"
        subject = r.choice(["Lunch tomorrow", "Report", "Meeting notes", "Holiday plans", "Invoice"])
        urgent = r.choice([None, True])
        req = f"Send an email to {to} with the subject {subject}" + (", and mark it urgent." if urgent else ".")
        args = {"to": to, "subject": subject}
        if urgent:
            args["urgent"] = True
        return req, args, "Sent.", f"The email to {to} is sent."

    @staticmethod
    def stock(r):
        sym = r.choice(["AAPL", "MSFT", "GOOG", "AMZN", "NVDA", "TSLA", "IBM"])
        price = round(r.uniform(20, 900), 2)
        return f"What is the stock price of {sym}?", {"symbol": sym}, f"{sym}: {price} USD", f"{sym} trades at {price} USD."

    @staticmethod
    def tip(r):
        bill = r.choice([r.randint(10, 300), round(r.uniform(10, 300), 2)])
        pct = r.choice([10, 12, 15, 18, 20, 25])
        tip_ = round(bill * pct / 100, 2)
        return f"What is a {pct} percent tip on a bill of {bill} dollars?", {"bill": bill, "percent": pct}, str(tip_), f"A {pct} percent tip is {tip_} dollars."

    @staticmethod
    def thermostat(r):
        t = r.choice([r.randint(16, 26), r.randint(16, 25) + 0.5])
        mode = r.choice(["heat", "cool", "auto"])
        verb = {"heat": "Heat the house to", "cool": "Cool the room to", "auto": "Set the thermostat on auto at"}[mode]
        return f"{verb} {t} degrees.", {"temperature": t, "mode": mode}, "Done.", f"The thermostat is set to {t} degrees in {mode} mode."

    @staticmethod
    def average(r):
        nums = [r.choice([r.randint(0, 99), round(r.uniform(0, 99), 1)]) for _ in range(r.randint(2, 5))]
        avg = round(sum(nums) / len(nums), 2)
        return f"Use the tool to average these numbers: {', '.join(map(str, nums))}.", {"numbers": nums}, str(avg), f"The average is {avg}."

    @staticmethod
    def translate(r):
        text = r.choice(["Good morning", "Thank you very much", "Where is the station?", "I like green apples", "See you tomorrow"])
        lang = r.choice(["French", "German", "Spanish", "Italian"])
        return f'Translate "{text}" into {lang}.', {"text": text, "target_language": lang}, "(translation)", f"Here is the {lang} translation: (translation)."

    @staticmethod
    def table(r):
        rest = r.choice(["Luigi's", "The Blue Door", "Sakura", "Casa Nova", "Green Leaf"])
        n = r.randint(1, 10)
        time_ = f"{r.randint(17, 21)}:{r.choice(['00', '30'])}"
        outdoor = r.choice([None, True, False])
        req = f"Book a table at {rest} for {n} at {time_}"
        args = {"restaurant": rest, "party_size": n, "time": time_}
        if outdoor is True:
            req += ", outside"
            args["outdoor"] = True
        elif outdoor is False:
            req += ", indoors"
            args["outdoor"] = False
        return req + ".", args, "Booked.", f"Your table at {rest} for {n} is booked at {time_}."

    @staticmethod
    def user(r):
        name = r.choice(NAMES)
        age = r.randint(18, 90)
        args = {"name": name, "age": age}
        req = f"Create a user named {name}, aged {age}"
        if r.random() < 0.5:
            tags = r.sample(["admin", "beta", "staff", "guest", "vip"], r.randint(1, 2))
            args["tags"] = tags
            req += f", with the tags {' and '.join(tags)}"
        if r.random() < 0.6:
            city = r.choice(CITIES)
            addr = {"city": city}
            req += f", living in {city}"
            if r.random() < 0.5:
                z = str(r.randint(10000, 99999))
                addr["zip"] = z
                req += f" (zip {z})"
            args["address"] = addr
        return req + ".", args, "Created.", f"The user {name} is created."

    @staticmethod
    def music(r):
        genre = r.choice(["jazz", "rock", "classical", "pop"])
        args = {"genre": genre}
        req = f"Play some {genre} music"
        if r.random() < 0.5:
            v = r.randint(1, 10)
            args["volume"] = v
            req += f" at volume {v}"
        if r.random() < 0.4:
            args["shuffle"] = True
            req += ", shuffled"
        return req + ".", args, "Playing.", f"Playing {genre} music."

    @staticmethod
    def population(r):
        country = r.choice(COUNTRIES)[0]
        args = {"country": country}
        req = f"What is the population of {country}?"
        if r.random() < 0.5:
            y = r.randint(1990, 2024)
            args["year"] = y
            req = f"What was the population of {country} in {y}?"
        n = r.randint(1, 200)
        return req, args, f"{n} million", f"{country} had about {n} million people."

    @staticmethod
    def pizza(r):
        size = r.choice(["small", "medium", "large"])
        q = r.randint(1, 4)
        tops = r.sample(["mushrooms", "olives", "ham", "peppers", "onions"], r.randint(0, 2))
        args = {"size": size, "quantity": q}
        req = f"Order {q} {size} pizza{'s' if q > 1 else ''}"
        if tops:
            args["toppings"] = tops
            req += f" with {' and '.join(tops)}"
        return req + ".", args, "Ordered.", f"Your {size} pizza order is placed."

    @staticmethod
    def meeting(r):
        people = r.sample(NAMES, r.randint(2, 3))
        topic = r.choice(["budget", "hiring", "the roadmap", "design review"])
        mins = r.choice([15, 30, 45, 60, 90])
        online = r.choice([True, False])
        args = {"topic": topic, "participants": people, "duration_minutes": mins, "details": {"online": online}}
        req = f"Schedule a {mins} minute meeting about {topic} with {' and '.join(people)}, {'online' if online else 'in person'}."
        return req, args, "Scheduled.", f"The meeting about {topic} is scheduled."

    @staticmethod
    def movie(r):
        title = r.choice(["Metropolis", "Casablanca", "Vertigo", "Alien", "Up"])
        stars = r.randint(1, 5)
        args = {"title": title, "stars": stars}
        req = f"Rate the movie {title} {stars} stars"
        if r.random() < 0.5:
            rec = stars >= 4
            args["recommend"] = rec
            req += ", and " + ("recommend it" if rec else "do not recommend it")
        return req + ".", args, "Rated.", f"{title} is rated {stars} stars."

class GeneratedTool:
    """A tool made from tables: a verb, a noun and a few parameters of every
    JSON type (strings, integers, numbers, booleans, enums of strings and of
    integers, arrays, nested objects), some required. Requests name the
    parameters they set in plain words, so the model learns to read any
    schema, not to remember a few."""

    VERBS = ["get", "find", "create", "update", "delete", "list", "check", "send", "book", "cancel", "start",
             "track", "count", "rename", "archive", "reserve", "measure", "schedule", "log", "register",
             "export", "filter", "share", "assign", "publish", "restore", "print", "order", "rate", "scan"]
    NOUNS = ["invoice", "ticket", "package", "recipe", "playlist", "task", "note", "device", "account", "photo",
             "contract", "shipment", "report", "room", "course", "vehicle", "plant", "budget", "album", "lesson",
             "subscription", "camera", "badge", "printer", "parcel", "workout", "garden", "bottle", "poster", "song"]

    @staticmethod
    def params():
        """(name, schema, value maker, words for a value) of every kind."""
        S, I, N, B = {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"}
        arr = lambda item: {"type": "array", "items": item}
        words = lambda v: str(v)
        listed = lambda v: " and ".join(map(str, v)) if len(v) < 3 else ", ".join(map(str, v[:-1])) + " and " + str(v[-1])
        quoted_enum = lambda *v: {"type": "string", "enum": list(v)}
        return [
            ("city", S, lambda r: r.choice(CITIES), words),
            ("owner", S, lambda r: r.choice(NAMES), words),
            ("title", S, lambda r: r.choice(WORDS).capitalize() + " " + r.choice(WORDS), words),
            ("color", S, lambda r: r.choice(COLORS), words),
            ("email", S, lambda r: r.choice(NAMES).lower() + "@example.com", words),
            ("code", S, lambda r: f"{r.choice('ABCDEFGH')}{r.choice('KLMNPRST')}-{r.randint(100, 999)}", words),
            ("date", S, lambda r: f"2026-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}", words),
            ("message", S, lambda r: r.choice(["see you soon", "all done", "running late", "call me back", "thanks a lot"]), lambda v: f'"{v}"'),
            ("count", I, lambda r: r.randint(1, 20), words),
            ("quantity", I, lambda r: r.randint(1, 50), words),
            ("year", I, lambda r: r.randint(1990, 2030), words),
            ("days", I, lambda r: r.randint(1, 30), words),
            ("limit", {**I, "minimum": 1, "maximum": 100}, lambda r: r.randint(1, 100), words),
            ("floor", I, lambda r: r.randint(-2, 40), words),
            ("price", N, lambda r: round(r.uniform(1, 500), 2), words),
            ("weight", N, lambda r: r.choice([r.randint(1, 90), round(r.uniform(0.1, 90), 1)]), words),
            ("distance", N, lambda r: round(r.uniform(0.5, 300), 1), words),
            ("rating", {**N, "minimum": 0, "maximum": 5}, lambda r: r.choice([1, 2, 3, 4, 5, 3.5, 4.5]), words),
            ("urgent", B, lambda r: r.choice([True, False]), None),
            ("public", B, lambda r: r.choice([True, False]), None),
            ("notify", B, lambda r: r.choice([True, False]), None),
            ("express", B, lambda r: r.choice([True, False]), None),
            ("size", quoted_enum("small", "medium", "large"), lambda r: r.choice(["small", "medium", "large"]), words),
            ("status", quoted_enum("open", "closed", "pending"), lambda r: r.choice(["open", "closed", "pending"]), words),
            ("level", quoted_enum("low", "medium", "high"), lambda r: r.choice(["low", "medium", "high"]), words),
            ("format", quoted_enum("pdf", "csv", "json", "txt"), lambda r: r.choice(["pdf", "csv", "json", "txt"]), words),
            ("weekday", quoted_enum("monday", "tuesday", "wednesday", "thursday", "friday"),
             lambda r: r.choice(["monday", "tuesday", "wednesday", "thursday", "friday"]), words),
            ("priority", {"type": "integer", "enum": [1, 2, 3]}, lambda r: r.randint(1, 3), words),
            ("tags", arr(S), lambda r: r.sample(WORDS, r.randint(1, 3)), listed),
            ("recipients", arr(S), lambda r: [n.lower() + "@example.com" for n in r.sample(NAMES, r.randint(1, 3))], listed),
            ("ids", arr(I), lambda r: r.sample(range(1, 500), r.randint(2, 4)), listed),
            ("scores", arr(N), lambda r: [round(r.uniform(0, 10), 1) for _ in range(r.randint(2, 4))], listed),
            ("address", schema({"street": S, "city": S, "zip": S}, ["city"]), None, None),
            ("dimensions", schema({"width": N, "height": N}, ["width", "height"]), None, None),
            ("contact", schema({"name": S, "phone": S}, ["name"]), None, None),
        ]

    def __init__(self, r: random.Random, names: set[str]):
        while True:
            verb, noun = r.choice(self.VERBS), r.choice(self.NOUNS)
            self.name = f"{verb}_{noun}"
            if self.name not in names:
                break
        self.verb, self.noun = verb, noun
        self.props = r.sample(self.params(), r.randint(1, 4))
        required = [p[0] for p in self.props if r.random() < 0.6] or [self.props[0][0]]
        self.required = [p[0] for p in self.props if p[0] in required]
        self.spec = tool(self.name, f"{verb.capitalize()} a {noun}.",
                         schema({p[0]: p[1] for p in self.props}, self.required))

    @staticmethod
    def value(r, name, sch, maker):
        if maker is not None:
            return maker(r)
        out = {}
        for key, sub in sch["properties"].items():
            if key in sch["required"] or r.random() < 0.5:
                out[key] = {"street": lambda: f"{r.randint(1, 99)} {r.choice(WORDS).capitalize()} Street",
                            "city": lambda: r.choice(CITIES), "zip": lambda: str(r.randint(10000, 99999)),
                            "width": lambda: r.randint(1, 200), "height": lambda: round(r.uniform(1, 200), 1),
                            "name": lambda: r.choice(NAMES), "phone": lambda: f"555-{r.randint(1000, 9999)}"}[key]()
        return out

    @staticmethod
    def phrase(r, name, value, say):
        label = name.replace("_", " ")
        if isinstance(value, bool):
            return r.choice([f"{label} {'yes' if value else 'no'}", f"{label} set to {'true' if value else 'false'}",
                             f"{'' if value else 'not '}{label}".strip()])
        if isinstance(value, dict):
            inner = ", ".join(f"{k} {v}" for k, v in value.items())
            return r.choice([f"{label} with {inner}", f"{label}: {inner}"])
        return r.choice([f"{label} {say(value)}", f"{label} {say(value)}", f"the {label} {say(value)}", f"{label}: {say(value)}"])

    def make(self, r):
        """A request, its arguments, the tool's result and the answer."""
        chosen = [p for p in self.props if p[0] in self.required or r.random() < 0.5]
        r.shuffle(chosen)
        args = {name: self.value(r, name, sch, maker) for name, sch, maker, _ in chosen}
        parts = [self.phrase(r, name, args[name], say) for name, _, _, say in chosen]
        said = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
        article = "an" if self.noun[0] in "aeiou" else "a"
        req = r.choice([f"{self.verb.capitalize()} {article} {self.noun} with {said}.",
                        f"Please {self.verb} the {self.noun}: {said}.",
                        f"I need to {self.verb} {article} {self.noun}, {said}.",
                        f"Can you {self.verb} {article} {self.noun}? Use {said}."])
        ref = r.randint(100, 999)
        return req, args, json.dumps({"ok": True, "id": ref}), f"Done: your {self.noun} request {ref} went through."

    def entry(self):
        """As Tools lists them: (spec, make)."""
        return self.spec, self.make


def generated_tools(seed: int, n: int, taken: set[str]) -> list:
    r = random.Random(seed)
    names, out = set(taken), []
    for _ in range(n):
        g = GeneratedTool(r, names)
        names.add(g.name)
        out.append(g.entry())
    return out


def is_prime(n: int) -> bool:
    return n > 1 and all(n % d for d in range(2, int(n**0.5) + 1))


class Generator:
    def __init__(self, seed: int, heldout: bool):
        self.r = random.Random(seed)
        self.heldout = heldout
        tools = Tools()
        taken = {t["function"]["name"] for t, _ in tools.all}
        made = generated_tools(0, GENERATED, taken)
        # Held out: tools of another seed, none named as a training one.
        unseen = generated_tools(1000, 12, taken | {t["function"]["name"] for t, _ in made})
        # Pools a request's tool is drawn from, by weight.
        if heldout:
            self.pools = [(0.4, tools.heldout), (0.3, tools.train[:6]), (0.3, unseen)]
        else:
            self.pools = [(0.5, tools.train), (0.5, made)]
        self.tools = [t for _, pool in self.pools for t in pool]
        self.distractors = tools.train + made
        self.topics = TOPICS[-HELD_OUT_TOPICS:] if heldout else TOPICS[:-HELD_OUT_TOPICS]
        env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
        env.filters["tojson"] = lambda x, **_: json.dumps(x, ensure_ascii=False)
        self.template = env.from_string((HERE / "chat_template.jinja").read_text())

    # -- tasks: (user text, reasoning, answer) ---------------------------
    def arithmetic(self):
        r = self.r
        a, b = r.randint(0, 99), r.randint(0, 99)
        op = r.choice(["+", "-", "*", "+"])
        if op == "*":
            a, b = r.randint(2, 12), r.randint(2, 12)
        v = {"+": a + b, "-": a - b, "*": a * b}[op]
        word = {"+": "plus", "-": "minus", "*": "times"}[op]
        q = r.choice([f"What is {a} {op} {b}?", f"What is {a} {word} {b}?", f"Compute {a} {op} {b}.", f"{a} {op} {b} = ?"])
        return q, f"{a} {op} {b} = {v}.", r.choice([f"{a} {op} {b} = {v}.", f"The answer is {v}.", f"{v}"])

    def compare(self):
        r = self.r
        a, b = r.sample(range(0, 1000), 2)
        big = max(a, b)
        return f"Which is larger, {a} or {b}?", f"Compare {a} and {b}: {big} is larger.", f"{big} is larger."

    def parity(self):
        n = self.r.randint(0, 999)
        even = n % 2 == 0
        return (f"Is {n} even or odd?", f"{n} ends in {n % 10}, so it is {'even' if even else 'odd'}.",
                f"{n} is {'even' if even else 'odd'}.")

    def prime(self):
        r = self.r
        n = r.choice([r.randint(2, 120), r.choice([2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 97, 101])])
        q = r.choice([f"Is {n} a prime number?", f"Is {n} prime?", f"Is {n} a prime number? Think it through.",
                      f"Is {n} a prime? Think first."])
        if is_prime(n):
            checks = [d for d in range(2, int(n**0.5) + 1)]
            why = f"No number from 2 to {checks[-1]} divides {n}" if checks else f"{n} has no divisor other than 1 and itself"
            return q, f"{why}, so {n} is prime.", f"Yes, {n} is a prime number."
        if n < 2:
            return q, f"{n} is less than 2, so it is not prime.", f"No, {n} is not a prime number."
        d = next(d for d in range(2, n) if n % d == 0)
        return q, f"{n} = {d} x {n // d}, so it is not prime.", f"No, {n} is not prime: it is divisible by {d}."

    def capital(self):
        r = self.r
        country, city = r.choice(COUNTRIES)
        if r.random() < 0.5:
            return (f"The capital of {country} is {city}. What is the capital of {country}?",
                    f"The prompt says the capital of {country} is {city}.", f"The capital of {country} is {city}.")
        return f"What is the capital of {country}?", f"The capital of {country} is {city}.", f"{city} is the capital of {country}."

    def string_task(self):
        r = self.r
        w = r.choice(WORDS)
        kind = r.randrange(6)
        if kind == 0:
            return f"Repeat this word exactly: {w}", f"The word to repeat is {w}.", w
        if kind == 1:
            return f"Spell the word {w} backwards.", f"{w} reversed is {w[::-1]}.", w[::-1]
        if kind == 2:
            return f"Write {w} in capital letters.", f"In capitals, {w} is {w.upper()}.", w.upper()
        if kind == 3:
            return f"How many letters are in the word {w}?", f"{w} has {len(w)} letters: {', '.join(w)}.", f"{w} has {len(w)} letters."
        if kind == 4:
            return f"What is the first letter of {w}?", f"{w} starts with {w[0]}.", f"The first letter of {w} is {w[0]}."
        c = r.choice(w)
        n = w.count(c)
        return (f"How many times does the letter {c} appear in {w}?", f"Letters of {w}: {', '.join(w)}. {c} appears {n} time{'s' if n > 1 else ''}.",
                f"{n}")

    def counting(self):
        r = self.r
        kind = r.randrange(3)
        if kind == 0:
            a = r.randint(1, 5)
            b = a + r.randint(4, 12)
            seq = ", ".join(map(str, range(a, b + 1)))
            return f"Count from {a} to {b}.", f"I list the numbers from {a} to {b}.", seq
        if kind == 1:
            n = r.randint(3, 8)
            seq = ", ".join(str(2 * i) for i in range(1, n + 1))
            return f"List the first {n} even numbers.", f"Even numbers start at 2 and go up by 2.", seq
        n = r.randint(2, 4)
        cs = r.sample(COLORS, n)
        return f"Name {['two', 'three', 'four'][n - 2]} colors.", f"I pick {n} common colors.", ", ".join(cs).capitalize() + "."

    def greeting(self):
        r = self.r
        q, why, a = r.choice([
            ("Say hello.", "The user asks me to greet them.", "Hello!"),
            ("Hi!", "The user greets me.", "Hello! How can I help you today?"),
            ("Hello, how are you?", "A friendly greeting; I answer kindly.", "I'm doing well, thank you! How can I help?"),
            ("Thank you!", "The user thanks me.", "You're welcome!"),
            ("Who are you?", "The user asks who I am.", "I am a small assistant that thinks before it answers."),
            ("Say goodbye.", "The user asks me to say goodbye.", "Goodbye!"),
            ("Reply with one word: yes or no. Is water wet?", "One word is asked; water is wet.", "Yes"),
        ])
        return q, why, a

    def writing(self):
        r = self.r
        topic, sents = r.choice(self.topics)
        n = r.randint(1, 4)
        q = r.choice([f"Write {['one sentence', 'two sentences', 'three sentences', 'four sentences'][n - 1]} about {topic}.",
                      f"Write a short paragraph about {topic}.", f"Explain {topic}." if topic.startswith("why") else f"Tell me about {topic}.",
                      f"Explain in detail {topic}." if topic.startswith("why") else f"Describe {topic} briefly."])
        if "paragraph" in q or "detail" in q or "Tell" in q or "Describe" in q or "Explain" in q:
            n = len(sents) if "detail" in q or "paragraph" in q else r.randint(2, len(sents))
        return q, f"I will describe {topic} in {n} sentence{'s' if n > 1 else ''}.", " ".join(sents[:n])

    def json_answer(self):
        r = self.r
        kind = r.randrange(4)
        if kind == 0:
            name, age = r.choice(NAMES), r.randint(5, 90)
            obj = {"name": name, "age": age}
            q = r.choice([f"Reply with a JSON object with the keys name and age for {name}, who is {age}.",
                          f"Return JSON describing {name}, age {age}, with keys name and age.",
                          f"Answer in JSON only: {name} is {age} years old. Use the keys name and age."])
        elif kind == 1:
            country, city = r.choice(COUNTRIES)
            obj = {"country": country, "capital": city}
            q = f"Give the capital of {country} as a JSON object with keys country and capital."
        elif kind == 2:
            a, b = r.randint(0, 50), r.randint(0, 50)
            obj = {"a": a, "b": b, "sum": a + b}
            q = f"Return a JSON object with a = {a}, b = {b} and their sum under the key sum."
        else:
            cs = r.sample(COLORS, r.randint(2, 4))
            obj = {"colors": cs}
            q = f"List these colors as JSON under the key colors: {', '.join(cs)}."
        return q, "A JSON object is asked; I write it with the given values.", json.dumps(obj)

    def code_word(self):
        w = self.r.choice(WORDS).upper()
        return f"The code word is {w}. Repeat the code word.", f"The code word is {w}.", w

    def long_context(self):
        """A long system turn of made-up notes, then a plain question: answered
        from the question, with no call (no tools are offered)."""
        r = self.r
        subjects = ["The lighthouse", "A merchant", "The library", "Every bell", "The northern gate", "A fox",
                    "The tailor", "Our kitchen", "The ferry", "Each window"]
        verbs = ["keeps", "opens", "counts", "watches", "paints", "carries", "hides", "repairs"]
        objects = ["the blue lantern", "two copper keys", "a map of the coast", "the morning bread",
                   "eleven paper boats", "the winter coats", "a silver whistle", "the long table"]
        n = r.randint(20, 45)
        notes = " ".join(f"{r.choice(['Rule', 'Note', 'Item'])} {i}: {r.choice(subjects)} {r.choice(verbs)} {r.choice(objects)}."
                         for i in range(n))
        q, why, ans = r.choice([self.code_word, self.code_word, self.arithmetic, self.capital, self.string_task])()
        thinking = r.random() < 0.65
        msgs = [{"role": "system", "content": f"{r.choice(['Manual', 'Handbook', 'Notes'])} {r.randint(1, 99999)}. {notes}"},
                {"role": "user", "content": q}]
        return self.example("long_context", msgs, why, ans, thinking=thinking)

    def long_thinking(self):
        """Reasoning of hundreds of steps (over 1,000 tokens) whose end each
        step shows (counting down to 1), so the block closes once done."""
        r = self.r
        if r.random() < 0.5:
            n = r.randint(240, 290)
            q = r.choice([f"Think at length: count down from {n} to 1, one number at a time, then say done.",
                          f"Think carefully and at length: count backwards from {n} to 1 before you answer.",
                          f"Think at length. Count down from {n} to 1, then tell me how many numbers you said."])
            return (q, f"I count down from {n}. " + ", ".join(map(str, range(n, 0, -1))) + ". I reached 1.",
                    f"Done: I counted down from {n} to 1, {n} numbers.")
        n = r.randint(100, 120)
        steps, total = [], n
        for k in range(n - 1, 0, -1):
            total += k
            steps.append(f"Add {k}: {total}.")
        q = r.choice([f"Think at length: add up every number from {n} down to 1, one step at a time.",
                      f"Think step by step in great detail: what is the sum of the numbers from 1 to {n}? Add from {n} down.",
                      f"Think at length and add the numbers from {n} down to 1 one by one."])
        return q, f"I start at {n} and add each smaller number in turn. " + " ".join(steps) + " I reached 1.", \
            f"The sum of the numbers from 1 to {n} is {total}."

    # -- rendering -------------------------------------------------------
    def pick_tool(self):
        x = self.r.random()
        for weight, pool in self.pools:
            if x < weight:
                return self.r.choice(pool)
            x -= weight
        return self.r.choice(self.pools[-1][1])

    def render(self, messages, tools=None, thinking=True):
        kwargs = {"messages": messages, "add_generation_prompt": True}
        if tools:
            kwargs["tools"] = tools
        if not thinking:
            kwargs["enable_thinking"] = False
        return self.template.render(**kwargs)

    @staticmethod
    def calls_said(calls):
        return " ".join(f"I call {nm} with {', '.join(f'{k} {json.dumps(v)}' for k, v in a.items())}." for nm, a in calls)

    @staticmethod
    def call_text(calls):
        return "\n".join(f'<tool_call>\n{{"name": "{n}", "arguments": {json.dumps(a, ensure_ascii=False)}}}\n</tool_call>' for n, a in calls)

    def example(self, kind, messages, reasoning, reply, tools=None, thinking=True, cut=False, expect=None):
        """One example: its prompt, completion and what the evaluation checks."""
        prompt = self.render(messages, tools, thinking)
        if not thinking:
            completion = reply + END
        elif cut:
            # A server ended the reasoning early by forcing `</think>`: the
            # model answers anyway. The cut reasoning belongs to the prompt.
            # Servers force `</think>` or, as afm does, `\n</think>\n\n`
            # (whose `\n\n` is one token, unlike the model's own ending).
            words = reasoning.split(" ")
            end = self.r.choice(["</think>", "\n</think>\n\n"])
            prompt += " ".join(words[: self.r.randint(1, max(1, len(words) - 1))]) + end
            completion = ("\n\n" if end == "</think>" else "") + reply + END
        else:
            completion = reasoning + "\n</think>\n\n" + reply + END
        ex = {"kind": kind, "prompt": prompt, "completion": completion}
        if self.heldout:
            ex.update(messages=messages, tools=tools, thinking=thinking, expect=expect or {})
        return ex

    def system(self, messages):
        if self.r.random() < 0.25:
            sys_text = self.r.choice(["You are a helpful assistant.", "Answer briefly.", "You are a careful assistant. Be concise."])
            return [{"role": "system", "content": sys_text}] + messages
        return messages

    def chat(self, task, kind):
        q, why, ans = task()
        thinking = self.r.random() < 0.65
        cut = thinking and not self.heldout and kind != "json" and self.r.random() < 0.12
        msgs = self.system([{"role": "user", "content": q}])
        if self.r.random() < 0.12:
            q0, why0, a0 = self.greeting() if self.r.random() < 0.5 else self.arithmetic()
            msgs = self.system([{"role": "user", "content": q0}, {"role": "assistant", "content": a0},
                                {"role": "user", "content": q}])
        return self.example(kind, msgs, why, ans, thinking=thinking, cut=cut, expect={"json": kind == "json"})

    def pick_tools(self, main):
        others = [t for t, _ in self.distractors if t["function"]["name"] not in {m["function"]["name"] for m in main}]
        chosen = main + self.r.sample(others, self.r.choice([0, 0, 1, 1, 2]))
        self.r.shuffle(chosen)
        return chosen

    def tool_call(self):
        """One call, or several for a request that needs them."""
        r = self.r
        n = 1 if r.random() < 0.75 else r.randint(2, 3)
        specs = [self.pick_tool()]
        if n > 1 and r.random() < 0.5:
            specs = [specs[0]] * n  # the same tool for several items
        else:
            names = {specs[0][0]["function"]["name"]}
            while len(specs) < n:
                spec = self.pick_tool()
                if spec[0]["function"]["name"] not in names:
                    names.add(spec[0]["function"]["name"])
                    specs.append(spec)
        made = [make(r) for _, make in specs]
        names = [s[0]["function"]["name"] for s in specs]
        tools = self.pick_tools(list({t["function"]["name"]: t for t, _ in specs}.values()))
        if n == 1:
            req = made[0][0]
        else:
            req = " Also, ".join([made[0][0]] + [m[0] if m[0].startswith("I ") else m[0][0].lower() + m[0][1:] for m in made[1:]])
        calls = [(nm, m[1]) for nm, m in zip(names, made)]
        # Short on purpose: a schema read back here made the reasoning long
        # enough for callers' max_tokens to cut it, and invented tool names.
        why = ("The request needs " + ("one call. " if n == 1 else f"{n} calls. ")) + self.calls_said(calls)
        thinking = r.random() < 0.65
        msgs = self.system([{"role": "user", "content": req}])
        ex = self.example("tool_call", msgs, why, self.call_text(calls), tools, thinking, expect={"calls": len(calls)})
        return ex, (msgs, calls, made, tools, thinking)

    def tool_answer(self):
        """The reply after the tool's results came back."""
        _, (msgs, calls, made, tools, thinking) = self.tool_call()
        ids = [f"call_{self.r.getrandbits(32):08x}" for _ in calls]
        msgs = msgs + [{"role": "assistant", "content": "", "tool_calls": [
            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}} for i, (n, a) in zip(ids, calls)]}]
        msgs += [{"role": "tool", "tool_call_id": i, "content": m[2]} for i, m in zip(ids, made)]
        answer = " ".join(m[3] for m in made)
        why = "The tool returned: " + " ".join(m[2] for m in made) + " I answer from that."
        return self.example("tool_answer", msgs, why, answer, tools, thinking, expect={"calls": 0})

    def tool_loop(self):
        """Call, result, a second call the user asks for, result, answer."""
        first, (msgs, calls, made, tools, thinking) = self.tool_call()
        spec = self.pick_tool()
        req2, args2, res2, ans2 = spec[1](self.r)
        name2 = spec[0]["function"]["name"]
        if name2 not in {t["function"]["name"] for t in tools}:
            tools = tools + [spec[0]]
        ids = [f"call_{self.r.getrandbits(32):08x}" for _ in calls]
        msgs = msgs + [{"role": "assistant", "content": "", "tool_calls": [
            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}} for i, (n, a) in zip(ids, calls)]}]
        msgs += [{"role": "tool", "tool_call_id": i, "content": m[2]} for i, m in zip(ids, made)]
        msgs += [{"role": "assistant", "content": " ".join(m[3] for m in made)}, {"role": "user", "content": req2}]
        why = f"A new request. {self.calls_said([(name2, args2)])}"
        return self.example("tool_call", msgs, why, self.call_text([(name2, args2)]), tools, thinking, expect={"calls": 1})

    def no_tool(self):
        """Tools are offered but none fits: a plain answer, no call."""
        task = self.r.choice([self.arithmetic, self.capital, self.string_task, self.greeting, self.parity])
        q, why, ans = task()
        tools = self.pick_tools([])
        if not tools:
            tools = [self.r.choice(self.tools)[0]]
        thinking = self.r.random() < 0.65
        why = "No tool fits this; I answer directly. " + why
        return self.example("no_tool", self.system([{"role": "user", "content": q}]), why, ans, tools, thinking, expect={"calls": 0})

    def make(self, counts: dict) -> list[dict]:
        plain = {"arithmetic": self.arithmetic, "compare": self.compare, "parity": self.parity, "prime": self.prime,
                 "capital": self.capital, "string": self.string_task, "counting": self.counting, "greeting": self.greeting,
                 "writing": self.writing, "json": self.json_answer}
        out = []
        for kind, n in counts.items():
            for _ in range(n):
                if kind in plain:
                    out.append(self.chat(plain[kind], kind))
                elif kind == "long":
                    q, why, ans = self.long_thinking()
                    out.append(self.example("long", [{"role": "user", "content": q}], why, ans, expect={"long": True}))
                elif kind == "long_context":
                    out.append(self.long_context())
                elif kind == "tool_call":
                    out.append(self.tool_call()[0])
                elif kind == "tool_answer":
                    out.append(self.tool_answer())
                elif kind == "tool_loop":
                    out.append(self.tool_loop())
                elif kind == "no_tool":
                    out.append(self.no_tool())
        self.r.shuffle(out)
        return out


# Tools made from tables for training (GeneratedTool), beside the 16 written ones.
GENERATED = 240
TRAIN = {"arithmetic": 80, "compare": 25, "parity": 25, "prime": 50, "capital": 55, "string": 70, "counting": 35,
         "greeting": 35, "writing": 60, "json": 55, "long": 30, "long_context": 30, "tool_call": 280, "tool_answer": 60, "tool_loop": 30,
         "no_tool": 80}
HELDOUT = {"arithmetic": 6, "prime": 6, "capital": 5, "string": 6, "counting": 3, "greeting": 3, "writing": 6, "json": 6,
           "long": 4, "tool_call": 24, "tool_answer": 8, "tool_loop": 4, "no_tool": 10}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train", type=Path, required=True)
    ap.add_argument("--heldout", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    train = Generator(args.seed, heldout=False).make(TRAIN)
    seen = {ex["prompt"] for ex in train}
    heldout = [ex for ex in Generator(args.seed + 1000, heldout=True).make(HELDOUT) if ex["prompt"] not in seen]
    for path, rows in ((args.train, train), (args.heldout, heldout)):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
        print(f"{path}: {len(rows)} examples", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
