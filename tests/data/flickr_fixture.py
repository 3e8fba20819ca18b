"""A one-image Flickr30K Entities fixture: the real captions of image 1000092795 and an XML file
in the documented layout (coordinates made up, structure as in the release)."""
import os

CAPTIONS = [
    "[/EN#1/people Two young guys] with [/EN#2/bodyparts shaggy hair] look at [/EN#3/bodyparts their hands] while hanging out in [/EN#8/scene the yard] .",
    "[/EN#1/people Two young , White males] are outside near [/EN#4/scene many bushes] .",
    "[/EN#1/people Two men] in [/EN#5/clothing green shirts] are standing in [/EN#9/scene a yard] .",
    "[/EN#6/people A man] in [/EN#7/clothing a blue shirt] standing in [/EN#9/scene a garden] .",
    "[/EN#1/people Two friends] enjoy [/EN#10/other time] spent together .",
]

# chain 1: two boxes, the first shared with chain 6; chain 4: two boxes; chains 8 and 9: scene;
# chain 10: nobndbox.
OBJECTS = """
  <object><name>1</name><name>6</name><bndbox><xmin>159</xmin><ymin>125</ymin><xmax>219</xmax><ymax>335</ymax></bndbox></object>
  <object><name>1</name><bndbox><xmin>21</xmin><ymin>101</ymin><xmax>120</xmax><ymax>400</ymax></bndbox></object>
  <object><name>2</name><bndbox><xmin>30</xmin><ymin>101</ymin><xmax>90</xmax><ymax>140</ymax></bndbox></object>
  <object><name>3</name><bndbox><xmin>60</xmin><ymin>200</ymin><xmax>100</xmax><ymax>240</ymax></bndbox></object>
  <object><name>4</name><bndbox><xmin>1</xmin><ymin>1</ymin><xmax>100</xmax><ymax>80</ymax></bndbox></object>
  <object><name>4</name><bndbox><xmin>250</xmin><ymin>10</ymin><xmax>333</xmax><ymax>90</ymax></bndbox></object>
  <object><name>5</name><bndbox><xmin>25</xmin><ymin>150</ymin><xmax>215</xmax><ymax>250</ymax></bndbox></object>
  <object><name>7</name><bndbox><xmin>160</xmin><ymin>150</ymin><xmax>215</xmax><ymax>250</ymax></bndbox></object>
  <object><name>8</name><name>9</name><nobndbox>0</nobndbox><scene>1</scene></object>
  <object><name>10</name><nobndbox>1</nobndbox><scene>0</scene></object>
"""

XML = f"""<annotation>
  <filename>1000092795.jpg</filename>
  <size><width>333</width><height>500</height><depth>3</depth></size>{OBJECTS}</annotation>
"""


def write_flickr_root(root, captions=CAPTIONS, xml=XML, image_id="1000092795", write_image=True):
    """Write Sentences/, Annotations/, train.txt and (optionally) the image under ``root``."""
    ann_root = os.path.join(root, "flickr30k_entities")
    for sub in ("Sentences", "Annotations"):
        os.makedirs(os.path.join(ann_root, sub), exist_ok=True)
    with open(os.path.join(ann_root, "Sentences", f"{image_id}.txt"), "w") as f:
        f.write("\n".join(captions) + "\n")
    with open(os.path.join(ann_root, "Annotations", f"{image_id}.xml"), "w") as f:
        f.write(xml)
    with open(os.path.join(ann_root, "train.txt"), "w") as f:
        f.write(image_id + "\n")
    image_root = os.path.join(root, "flickr30k-images")
    os.makedirs(image_root, exist_ok=True)
    if write_image:
        from PIL import Image

        Image.new("RGB", (333, 500)).save(os.path.join(image_root, f"{image_id}.jpg"))
    return ann_root, image_root
