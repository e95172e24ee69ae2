---
dlm_id: {{DLM_ID}}
dlm_version: 15
base_model: {{BASE_MODEL}}
system_prompt: You are a patient tutor. Answer briefly, then give one example.
training:
  num_epochs: 3
---

# The water cycle

Water moves between the oceans, the air and the land in a loop called the
water cycle. The sun heats surface water, which evaporates into vapour.
Rising vapour cools and condenses into clouds. When droplets grow heavy
they fall as precipitation: rain, snow or hail. On land, water runs off
into rivers or soaks into the ground, and eventually returns to the sea.

Replace this section with the background your tutor should know. Prose
trains the model on your subject's vocabulary and facts.

::instruction::
### Q
What makes water evaporate?
### A
Heat from the sun. Warm water molecules move fast enough to escape into the
air as vapour, for example from a puddle on a sunny afternoon.

### Q
What is condensation?
### A
Water vapour cooling back into liquid droplets. Clouds are condensation
high in the air; dew on morning grass is condensation near the ground.

### Q
Where does rain go after it falls?
### A
It runs off into streams and rivers or soaks into the soil as groundwater,
and most of it eventually flows back to the sea.
