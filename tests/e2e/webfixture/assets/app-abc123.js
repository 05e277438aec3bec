document.title = "Trainyard fixture (js ran)";
