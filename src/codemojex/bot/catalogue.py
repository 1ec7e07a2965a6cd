# ruff: noqa: E501  (a catalogue of texts: one entry a line reads best)
"""Every text the bot sends, by key and language: English, and Spanish for players whose
Telegram ``language_code`` starts with ``es``. Pure.

:func:`language` picks the catalogue from Telegram's code (``"es-AR"`` → ``es``; anything
unknown → ``en``); :func:`text` formats one entry, falling back to English for a key a
language lacks. A test checks both catalogues have the same keys and the same fields.
"""

from __future__ import annotations

__all__ = ["LANGUAGES", "TEXTS", "language", "text"]

EN: dict[str, str] = {
    "round": ("🎯 Round {tag} is open for {left}.\nSix emojis are hidden, drawn from:\n{emojis}\n"
              "A guess costs {price} coins: send six emojis, with or without spaces, e.g. {example}"),
    "round_closing": "⌛ Round {tag} is closing: it takes no more guesses. /round shows the next one.",
    "round_closed": "⌛ Round {tag} has closed: it takes no more guesses. /round shows the next one.",
    "no_round": "⏳ No round is open right now; the next one starts soon. Try /round in a moment.",
    "no_round_in": "⏳ No round is open right now; the next one opens in {left}. Try /round then.",
    "no_round_paused": "⏸ The operators have paused the game: no round is open. Try /round later.",
    "no_round_over": "⏳ No round is open and none is scheduled: this season is over. Thanks for playing!",
    "welcome_new": "👋 Welcome to Codemojex, {name}! You got {granted} starting coins. Balance: {balance} coins.",
    "welcome_back": "👋 Welcome to Codemojex, {name}! Welcome back. Balance: {balance} coins.",
    "rules": ("Guess the round's six hidden emojis; each position scores 100 − 20 per step away "
              "from where that emoji really is. A position you find exactly stays found for the rest "
              "of the round. The best guesses share the pot."),
    "accepted": ("✅ Guess {guess} accepted (−{price} coins, balance {balance}). Your scores: one message per "
                 "round, then the result at the close."),
    "kept": "🔒 Kept where you found them exactly: {kept}.",
    "bad_guess": "🤔 That is not a valid guess: {detail}.",
    "use_six_of": "Use six of: {emojis}",
    "insufficient": ("💸 Not enough coins: a guess costs {price}, you have {balance}. "
                     "Wait for a payout, or claim your /daily coins."),
    "not_registered": "Send /start first to join the game and get your starting coins.",
    "closed": "⌛ That round has closed. /round shows the next one.",
    "unavailable": "⚠️ The game could not take your guess just now; nothing was charged. Please send it again.",
    "balance": "💰 Your balance: {balance} coins.",
    "board_empty": "🏆 Nobody on the board yet.",
    "board_all": "🏆 Top players by coins:",
    "board_round": "🏆 Best scores this round:",
    "board_week": "🏆 Most coins won this week:",
    "you": " (you)",
    "help": ("Codemojex: guess the six hidden emojis of the round.\n"
             "/start — join (starting coins, once)\n"
             "/round — the current round and its emojis\n"
             "/guess 😀😎🤖👻🐱🐶 — or just send the six emojis\n"
             "/quick — a random guess\n"
             "/balance — your coins\n"
             "/daily — your daily coins\n"
             "/top — the leaderboard (/top round, /top week)\n"
             "/history — your last rounds\n"
             "/help — this text"),
    "unknown": "I don't know /{word}. ",
    "empty": "I read text only: send six emojis to guess, or /help.",
    "daily_granted": "🎁 {coins} daily coins added. Balance: {balance} coins. Come back tomorrow for more.",
    "daily_taken": "🎁 You already had today's coins. Balance: {balance} coins. Come back tomorrow.",
    "scores": "📊 Round {tag}, your scores so far:\n{lines}\nBest: {best}/600.",
    "scores_open": "Final results at the close.",
    "scores_closed": "The round has closed: your result follows.",
    "settled_won": ("🏁 Round {tag} settled. The secret was {secret}.\nYour best: {best}/600 over {guesses}. "
                    "You won {payout} coins! 🎉 Balance: {balance} coins."),
    "settled_back": ("🏁 Round {tag} settled. The secret was {secret}.\nYour best: {best}/600 over {guesses}. "
                     "{payout} of the {spent} coins you spent come back to you. Balance: {balance} coins."),
    "settled_lost": ("🏁 Round {tag} settled. The secret was {secret}.\nYour best: {best}/600 over {guesses}. "
                     "No payout this time. Balance: {balance} coins."),
    "guesses_one": "{n} guess",
    "guesses_many": "{n} guesses",
    "history_empty": "📜 You have not played a round yet.",
    "history_head": "📜 Your last rounds:",
    "history_row": "{tag}: {guesses}, best {best}, {payout}",
    "history_paid": "won {payout} coins",
    "history_unpaid": "no payout",
    "history_open": "still open",
    "voided": "↩️ Round {tag} was voided by the operators: your {coins} coins for its guesses were refunded.",
    "granted": "🎁 The operators gave you {coins} coins. Balance: {balance} coins.",
}

ES: dict[str, str] = {
    "round": ("🎯 La ronda {tag} está abierta durante {left}.\nHay seis emojis ocultos, elegidos entre:\n"
              "{emojis}\nUn intento cuesta {price} monedas: envía seis emojis, con o sin espacios, "
              "p. ej. {example}"),
    "round_closing": "⌛ La ronda {tag} se está cerrando: ya no acepta intentos. /round muestra la siguiente.",
    "round_closed": "⌛ La ronda {tag} ya se cerró: no acepta más intentos. /round muestra la siguiente.",
    "no_round": "⏳ Ahora no hay ninguna ronda abierta; la siguiente empieza pronto. Prueba /round en un momento.",
    "no_round_in": "⏳ Ahora no hay ninguna ronda abierta; la siguiente abre en {left}. Prueba /round entonces.",
    "no_round_paused": "⏸ Los operadores han pausado el juego: no hay ninguna ronda abierta. Prueba /round más tarde.",
    "no_round_over": "⏳ No hay ninguna ronda abierta ni prevista: esta temporada ha terminado. ¡Gracias por jugar!",
    "welcome_new": "👋 ¡Bienvenido a Codemojex, {name}! Recibes {granted} monedas iniciales. Saldo: {balance} monedas.",
    "welcome_back": "👋 ¡Bienvenido a Codemojex, {name}! Hola de nuevo. Saldo: {balance} monedas.",
    "rules": ("Adivina los seis emojis ocultos de la ronda; cada posición puntúa 100 − 20 por cada paso de "
              "distancia a donde está de verdad ese emoji. Una posición que aciertas exactamente se queda "
              "acertada el resto de la ronda. Los mejores intentos se reparten el bote."),
    "accepted": ("✅ Intento {guess} aceptado (−{price} monedas, saldo {balance}). Tus puntuaciones: un mensaje "
                 "por ronda, y el resultado al cierre."),
    "kept": "🔒 Se mantienen donde ya los acertaste: {kept}.",
    "bad_guess": "🤔 Ese intento no es válido: {detail}.",
    "use_six_of": "Usa seis de: {emojis}",
    "insufficient": ("💸 No tienes monedas suficientes: un intento cuesta {price} y tienes {balance}. "
                     "Espera un premio o recoge tus monedas con /daily."),
    "not_registered": "Envía /start primero para unirte al juego y recibir tus monedas iniciales.",
    "closed": "⌛ Esa ronda ya se cerró. /round muestra la siguiente.",
    "unavailable": ("⚠️ El juego no pudo aceptar tu intento ahora mismo; no se ha cobrado nada. "
                    "Envíalo de nuevo, por favor."),
    "balance": "💰 Tu saldo: {balance} monedas.",
    "board_empty": "🏆 Todavía no hay nadie en la clasificación.",
    "board_all": "🏆 Los jugadores con más monedas:",
    "board_round": "🏆 Mejores puntuaciones de esta ronda:",
    "board_week": "🏆 Más monedas ganadas esta semana:",
    "you": " (tú)",
    "help": ("Codemojex: adivina los seis emojis ocultos de la ronda.\n"
             "/start — unirte (monedas iniciales, una vez)\n"
             "/round — la ronda actual y sus emojis\n"
             "/guess 😀😎🤖👻🐱🐶 — o envía solo los seis emojis\n"
             "/quick — un intento al azar\n"
             "/balance — tus monedas\n"
             "/daily — tus monedas del día\n"
             "/top — la clasificación (/top round, /top week)\n"
             "/history — tus últimas rondas\n"
             "/help — este texto"),
    "unknown": "No conozco /{word}. ",
    "empty": "Solo leo texto: envía seis emojis para adivinar, o /help.",
    "daily_granted": "🎁 {coins} monedas del día añadidas. Saldo: {balance} monedas. Vuelve mañana a por más.",
    "daily_taken": "🎁 Ya recogiste las monedas de hoy. Saldo: {balance} monedas. Vuelve mañana.",
    "scores": "📊 Ronda {tag}, tus puntuaciones hasta ahora:\n{lines}\nMejor: {best}/600.",
    "scores_open": "Resultados finales al cierre.",
    "scores_closed": "La ronda ya se cerró: tu resultado llega a continuación.",
    "settled_won": ("🏁 Ronda {tag} liquidada. El secreto era {secret}.\nTu mejor intento: {best}/600 de "
                    "{guesses}. ¡Ganas {payout} monedas! 🎉 Saldo: {balance} monedas."),
    "settled_back": ("🏁 Ronda {tag} liquidada. El secreto era {secret}.\nTu mejor intento: {best}/600 de "
                     "{guesses}. Recuperas {payout} de las {spent} monedas que gastaste. Saldo: {balance} monedas."),
    "settled_lost": ("🏁 Ronda {tag} liquidada. El secreto era {secret}.\nTu mejor intento: {best}/600 de "
                     "{guesses}. Esta vez sin premio. Saldo: {balance} monedas."),
    "guesses_one": "{n} intento",
    "guesses_many": "{n} intentos",
    "history_empty": "📜 Todavía no has jugado ninguna ronda.",
    "history_head": "📜 Tus últimas rondas:",
    "history_row": "{tag}: {guesses}, mejor {best}, {payout}",
    "history_paid": "ganaste {payout} monedas",
    "history_unpaid": "sin premio",
    "history_open": "aún abierta",
    "voided": ("↩️ Los operadores anularon la ronda {tag}: te hemos devuelto las {coins} monedas "
               "de sus intentos."),
    "granted": "🎁 Los operadores te han dado {coins} monedas. Saldo: {balance} monedas.",
}

TEXTS: dict[str, dict[str, str]] = {"en": EN, "es": ES}
LANGUAGES = tuple(TEXTS)


def language(code: str | None) -> str:
    """The catalogue for Telegram's ``language_code`` (``en`` when unknown or missing)."""
    head = (code or "").split("-", 1)[0].lower()
    return head if head in TEXTS else "en"


def text(lang: str, key: str, **fields: object) -> str:
    """Entry ``key`` in ``lang`` (English if that language lacks it), formatted."""
    template = TEXTS.get(lang, EN).get(key) or EN[key]
    return template.format(**fields)
