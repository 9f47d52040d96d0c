"""A small hand-written corpus of four clearly separate concepts, for real-model tests."""

from __future__ import annotations

CONCEPTS: dict[str, list[str]] = {
    "baking": [
        "Knead the bread dough for ten minutes until it is smooth and elastic.",
        "Let the bread dough rise in a warm place until it doubles in size.",
        "Bake the sourdough loaf at 230 degrees with steam for a crisp crust.",
        "A sourdough starter needs feeding with flour and water every day.",
        "Shape the proofed dough into a tight ball before baking the bread.",
        "Whole wheat flour makes a denser bread than white bread flour.",
        "Score the top of the loaf with a razor so the bread can expand in the oven.",
        "Yeast makes bread dough rise by producing carbon dioxide gas.",
        "Cool the baked bread on a wire rack before slicing the loaf.",
        "Add salt to bread dough after the flour and water have rested.",
    ],
    "space": [
        "The rocket launched the satellite into low Earth orbit.",
        "Astronauts on the space station conduct experiments in microgravity.",
        "The Mars rover drilled into rock samples on the red planet.",
        "A telescope in orbit photographed a distant spiral galaxy.",
        "The spacecraft used a gravity assist from Jupiter to reach Saturn.",
        "NASA plans to return astronauts to the Moon with a new rocket.",
        "The space probe sent back images of icy moons around the gas giant.",
        "Solar panels power the satellite while it orbits the planet.",
        "The lunar lander touched down near the south pole of the Moon.",
        "Engineers tested the rocket engine before the orbital launch.",
    ],
    "football": [
        "The striker scored a goal in the final minute of the football match.",
        "The goalkeeper saved a penalty kick to win the soccer game.",
        "The football team won the league after a long season of matches.",
        "The coach changed the formation at half time of the soccer match.",
        "The midfielder passed the ball to the winger who crossed it into the box.",
        "Fans cheered in the stadium as their football club lifted the cup.",
        "The referee showed a red card to the defender for a hard tackle.",
        "The soccer player signed a contract with a new club for the season.",
        "The match ended in a draw after extra time and a penalty shootout.",
        "The football club's young striker scored twice in the derby match.",
    ],
    "finance": [
        "The central bank raised interest rates to fight inflation.",
        "Stock markets fell as investors worried about rising interest rates.",
        "The company reported higher quarterly profits and raised its dividend.",
        "Bond yields climbed after the inflation report surprised investors.",
        "The bank cut its mortgage rates for new home loans.",
        "Shares of the tech company rose after strong earnings results.",
        "Investors moved money into bonds as stock markets turned volatile.",
        "The currency weakened against the dollar after the rate decision.",
        "Analysts expect the central bank to hold interest rates steady.",
        "The firm's revenue grew while its operating costs fell this quarter.",
    ],
}
